// `com.svc.runner.unhealthy.v1`: a runner stopped answering its health checks.
import type { EventKind, FactOf } from './kind.ts';
import { runnerKind } from './shared.ts';

export const runner_unhealthy: EventKind<FactOf<'runner_unhealthy'>> = runnerKind(
  'runner_unhealthy',
  'com.svc.runner.unhealthy.v1',
  'unhealthy',
  'required',
  ['outcome:completion', 'outcome:failures'],
);
