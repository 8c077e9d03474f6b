// `com.svc.runner.inactive.v1`: a runner has been inactive too long.
import type { EventKind, FactOf } from './kind.ts';
import { EXAMPLE, runnerKind } from './shared.ts';

export const runner_inactive: EventKind<FactOf<'runner_inactive'>> = runnerKind(
  'runner_inactive',
  'com.svc.runner.inactive.v1',
  'inactive',
  'optional',
  [],
  {
    description: 'A runner says it is inactive (an `inactive` message from it, with its reason).',
    subject_pattern: '<org>/runner_inactive/<runner>/inactive',
    example: {
      kind: 'runner_inactive',
      transition: 'inactive',
      org_id: EXAMPLE.org,
      time: EXAMPLE.time,
      runner: EXAMPLE.runner,
      reason: 'scaled to zero',
      install_id: EXAMPLE.install,
    },
  },
);
