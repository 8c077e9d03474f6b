// `com.svc.install.health.v1`: an install's composite verdict became degraded or recovered.
import { z } from 'zod';
import { VERDICTS } from '../../domain/status.ts';
import type { EventKind, FactOf } from './kind.ts';
import { c, EXAMPLE, eventDataSchema, ownInstall } from './shared.ts';

export const install_health: EventKind<FactOf<'install_health'>> = {
  kind: 'install_health',
  type: 'com.svc.install.health.v1',
  subject: (f) => `${f.org_id}/install_health/${f.install_id}/${f.transition}`,
  data: {
    build: (f) => ({
      install_id: f.install_id,
      health: { verdict: f.health.verdict, previous: f.health.previous ?? null, component_id: f.health.component_id },
    }),
    schema: eventDataSchema('install_health', ['degraded', 'recovered'], {
      install_id: z.string(),
      health: z.strictObject({ verdict: z.enum(VERDICTS), previous: z.enum(VERDICTS).nullable(), component_id: z.string() }),
    }),
  },
  slug: (f) => `event:install.${f.transition}`,
  routes: { resources: ['installs'], events: ['install.degraded', 'install.recovered'] },
  outcomes: () => [],
  classify: () => c('installs', 'health'),
  // its component is the cause, not the subject: no component link, and `match` has none
  links: (f) => ({ install: ownInstall(f) }),
  match: (f) => ({ install: ownInstall(f) }),
  catalog: {
    description:
      "An install's composite verdict (the worst of its components') became degraded or unhealthy (`degraded`), or healthy " +
      'again (`recovered`); `health.component_id` names the component whose verdict caused it.',
    subject_pattern: '<org>/install_health/<install>/<transition>',
    example: {
      kind: 'install_health',
      transition: 'degraded',
      org_id: EXAMPLE.org,
      time: EXAMPLE.time,
      install_id: EXAMPLE.install,
      health: { verdict: 'unhealthy', previous: 'healthy', component_id: EXAMPLE.component },
    },
  },
  orderKey: (f) => f.install_id,
};
