// `com.svc.runner.unhealthy.v1`: a runner stopped answering its health checks.
import type { EventKind, FactOf } from './kind.ts';
import { EXAMPLE, runnerKind } from './shared.ts';

export const runner_unhealthy: EventKind<FactOf<'runner_unhealthy'>> = runnerKind(
  'runner_unhealthy',
  'com.svc.runner.unhealthy.v1',
  'unhealthy',
  'required',
  ['outcome:completion', 'outcome:failures'],
  {
    description:
      'A runner missed its health check: no heartbeat saying its process runs since the previous check. Sent once when it ' +
      'goes offline, again only after it came back and went offline again.',
    subject_pattern: '<org>/runner_unhealthy/<runner>/unhealthy',
    example: {
      kind: 'runner_unhealthy',
      transition: 'unhealthy',
      org_id: EXAMPLE.org,
      time: EXAMPLE.time,
      runner: EXAMPLE.runner,
      reason: 'no heartbeat since 2026-01-15T09:28:00.000Z',
      install_id: EXAMPLE.install,
    },
  },
);
