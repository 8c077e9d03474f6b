// `com.svc.runner.inactive.v1`: a runner has been inactive too long.
import type { EventKind, FactOf } from './kind.ts';
import { runnerKind } from './shared.ts';

export const runner_inactive: EventKind<FactOf<'runner_inactive'>> = runnerKind(
  'runner_inactive',
  'com.svc.runner.inactive.v1',
  'inactive',
  'optional',
  [],
);
