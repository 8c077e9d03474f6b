// `com.svc.webhook.ping.v1`: sent to one webhook by its ping endpoint (CONTRACT 4.1), bypassing
// interests; never classified.
import { z } from 'zod';
import type { EventKind, FactOf } from './kind.ts';
import { EXAMPLE, eventDataSchema } from './shared.ts';

export const webhook_ping: EventKind<FactOf<'webhook_ping'>> = {
  kind: 'webhook_ping',
  type: 'com.svc.webhook.ping.v1',
  subject: (f) => `${f.org_id}/webhook_ping/${f.webhook_id}/ping`,
  data: { build: (f) => ({ webhook_id: f.webhook_id }), schema: eventDataSchema('webhook_ping', ['ping'], { webhook_id: z.string() }) },
  slug: () => 'event:webhook.ping',
  // sent to one webhook by its own endpoint: interests (and filters) never apply
  routes: { resources: [], events: [] },
  outcomes: () => [],
  classify: () => null,
  links: () => ({}),
  match: () => ({}),
  orderKey: () => null,
  direct: true,
  catalog: {
    description: 'Sent to one webhook by its ping endpoint (and before an enable), whatever it subscribes to: is the receiver there?',
    subject_pattern: '<org>/webhook_ping/<webhook>/ping',
    example: { kind: 'webhook_ping', transition: 'ping', org_id: EXAMPLE.org, time: EXAMPLE.time, webhook_id: EXAMPLE.webhook },
  },
};
