// `com.svc.webhook.delivery.v1`: what the delivery watchdog says of one webhook (CONTRACT 4.1): it
// is failing, recovered, disabled or enabled. Never sent to the webhook it is about.
import { z } from 'zod';
import type { EventKind, FactOf } from './kind.ts';
import { c, EXAMPLE, eventDataSchema } from './shared.ts';

export const webhook_delivery: EventKind<FactOf<'webhook_delivery'>> = {
  kind: 'webhook_delivery',
  type: 'com.svc.webhook.delivery.v1',
  subject: (f) => `${f.org_id}/webhook_delivery/${f.webhook.id}/${f.transition}`,
  data: {
    build: (f) => {
      const x = f.delivery;
      return {
        webhook: { id: f.webhook.id, url_host: f.webhook.url_host },
        delivery: {
          consecutive_failures: x.consecutive_failures,
          failing_since: x.failing_since,
          last_error: x.last_error,
          last_status_code: x.last_status_code,
          ...(x.failed_events !== undefined ? { failed_events: x.failed_events } : {}),
          ...(x.recover_since !== undefined ? { recover_since: x.recover_since } : {}),
          ...(x.disabled_reason !== undefined ? { disabled_reason: x.disabled_reason } : {}),
        },
      };
    },
    schema: eventDataSchema('webhook_delivery', ['failing', 'recovered', 'disabled', 'enabled'], {
      webhook: z.strictObject({ id: z.string(), url_host: z.string() }),
      delivery: z.strictObject({
        consecutive_failures: z.number(),
        failing_since: z.string().nullable(),
        last_error: z.string().nullable(),
        last_status_code: z.number().nullable(),
        failed_events: z.number().optional(),
        recover_since: z.string().nullable().optional(),
        disabled_reason: z.string().optional(),
      }),
    }),
  },
  slug: (f) => `event:webhook.${f.transition}`,
  routes: { resources: ['webhooks'], events: ['webhook.failing', 'webhook.recovered', 'webhook.disabled', 'webhook.enabled'] },
  outcomes: () => [],
  classify: () => c('webhooks', 'delivery'),
  links: () => ({}),
  match: (f) => ({ not_to: f.webhook.id }),
  catalog: {
    description:
      'The delivery watchdog on another webhook of the org: it is failing (at 5, 20, 50, then every 100 consecutive failures), ' +
      'recovered (with how many events failed and where a recovery should start), disabled or enabled. Never sent to the ' +
      'webhook it is about.',
    subject_pattern: '<org>/webhook_delivery/<webhook>/<transition>',
    example: {
      kind: 'webhook_delivery',
      transition: 'failing',
      org_id: EXAMPLE.org,
      time: EXAMPLE.time,
      webhook: { id: EXAMPLE.webhook, url_host: 'hooks.example.com' },
      delivery: {
        consecutive_failures: 5,
        failing_since: '2026-01-15T09:12:41.000Z',
        last_error: 'HTTP 503',
        last_status_code: 503,
      },
    },
  },
  orderKey: (f) => f.webhook.id,
};
