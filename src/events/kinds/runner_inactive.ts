// `com.svc.runner.inactive.v1`: a runner has been inactive too long.
import type { EventKind, FactOf } from './kind.ts';
import { c, ownInstall, runnerData, runnerDataSchema } from './shared.ts';

export const runner_inactive: EventKind<FactOf<'runner_inactive'>> = {
  kind: 'runner_inactive',
  type: 'com.svc.runner.inactive.v1',
  subject: (f) => `${f.org_id}/runner_inactive/${f.runner.id}/inactive`,
  data: { build: runnerData, schema: runnerDataSchema('runner_inactive', 'inactive', 'optional') },
  slug: () => 'event:runner.inactive',
  outcomes: () => [],
  classify: () => c('runners', 'inactive'),
  links: (f) => ({ install: ownInstall(f) }),
  match: (f) => ({ install: ownInstall(f) }),
};
