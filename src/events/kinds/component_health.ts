// `com.svc.component.health.v1`: a component of an install became unhealthy or recovered.
import { z } from 'zod';
import { VERDICTS } from '../../domain/status.ts';
import type { EventKind, FactOf } from './kind.ts';
import { c, EXAMPLE, eventDataSchema, firstPresent, ownInstall } from './shared.ts';

export const component_health: EventKind<FactOf<'component_health'>> = {
  kind: 'component_health',
  type: 'com.svc.component.health.v1',
  subject: (f) => `${f.org_id}/component_health/${f.install_id}/${f.component_id}/${f.transition}`,
  data: {
    build: (f) => ({
      install_id: f.install_id,
      component_id: f.component_id,
      health: {
        verdict: f.health.verdict,
        previous: f.health.previous ?? null,
        ...(f.health.reason !== undefined ? { reason: f.health.reason } : {}),
      },
    }),
    schema: eventDataSchema('component_health', ['unhealthy', 'recovered'], {
      install_id: z.string(),
      component_id: z.string(),
      health: z.strictObject({ verdict: z.enum(VERDICTS), previous: z.enum(VERDICTS).nullable(), reason: z.string().optional() }),
    }),
  },
  slug: (f) => `event:component.${f.transition}`,
  routes: { resources: ['components'], events: ['component.unhealthy', 'component.recovered'] },
  outcomes: () => [],
  classify: () => c('components', 'health'),
  links: (f) => ({ install: ownInstall(f), component: firstPresent(f.component_id) }),
  match: (f) => ({ install: ownInstall(f), component: f.component_id }),
  catalog: {
    description:
      "A component of an install turned bad (`unhealthy`: a health checker's verdict degraded or unhealthy) or good again " +
      '(`recovered`: healthy), with the verdict before it and the reason the checker gave.',
    subject_pattern: '<org>/component_health/<install>/<component>/<transition>',
    example: {
      kind: 'component_health',
      transition: 'unhealthy',
      org_id: EXAMPLE.org,
      time: EXAMPLE.time,
      install_id: EXAMPLE.install,
      component_id: EXAMPLE.component,
      health: { verdict: 'unhealthy', previous: 'healthy', reason: 'p99 latency 2.4s over 1s for 5m' },
    },
  },
  orderKey: (f) => f.install_id,
};
