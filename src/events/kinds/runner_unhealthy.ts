// `com.svc.runner.unhealthy.v1`: a runner stopped answering its health checks.
import type { EventKind, FactOf } from './kind.ts';
import { c, ownInstall, runnerData, runnerDataSchema } from './shared.ts';

export const runner_unhealthy: EventKind<FactOf<'runner_unhealthy'>> = {
  kind: 'runner_unhealthy',
  type: 'com.svc.runner.unhealthy.v1',
  subject: (f) => `${f.org_id}/runner_unhealthy/${f.runner.id}/unhealthy`,
  data: { build: runnerData, schema: runnerDataSchema('runner_unhealthy', 'unhealthy', 'required') },
  slug: () => 'event:runner.unhealthy',
  outcomes: () => ['outcome:completion', 'outcome:failures'],
  classify: () => c('runners', 'unhealthy'),
  links: (f) => ({ install: ownInstall(f) }),
  match: (f) => ({ install: ownInstall(f) }),
};
