// `com.svc.component.health.v1`: a component of an install became unhealthy or recovered.
import { z } from 'zod';
import { VERDICTS } from '../../domain/status.ts';
import type { EventKind, FactOf } from './kind.ts';
import { c, eventDataSchema, firstPresent, ownInstall } from './shared.ts';

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
  outcomes: () => [],
  classify: () => c('components', 'health'),
  links: (f) => ({ install: ownInstall(f), component: firstPresent(f.component_id) }),
  match: (f) => ({ install: ownInstall(f), component: f.component_id }),
  orderKey: (f) => f.install_id,
};
