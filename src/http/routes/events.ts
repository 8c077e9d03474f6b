// CONTRACT 4.5: the event history of the org.
import * as svc from '../../services/history.ts';
import { defineRoute, readRoute, reply } from '../api-route.ts';
import { cloudEventSchema, eventListQuerySchema, eventPageSchema } from '../../schemas/events.ts';
import { recipientsSchema } from '../../schemas/filters.ts';
import { eventRecipients } from '../../services/filter-dry-run.ts';

const tag = 'events';

export const eventRoutes = [
  defineRoute({
    operationId: 'listEvents',
    method: 'get',
    path: '/v1/events',
    tag,
    scope: 'read',
    summary: "The org's kept events, oldest first",
    description:
      'Every event the engine emitted (not pings) is kept for --event-retention (default 7 days). ' +
      "Each CloudEvent is returned exactly as delivered. With order_key: that key's events in sequence order " +
      '(above after_sequence), CONTRACT 10.1.',
    query: eventListQuerySchema,
    responses: { 200: { description: 'a page of events', schema: eventPageSchema } },
    errors: [400],
    // each event as stored (it was checked when it was emitted): no parse, check and stringify of 500 events per page
    handle: ({ ctx, orgId, query }) => reply.okJsonText(svc.listEventsJsonText(ctx, orgId, query)),
  }),
  readRoute(
    {
      operationId: 'getEvent',
      path: '/v1/events/{event_id}',
      tag,
      summary: 'One kept event (past the retention: 404)',
      ok: ['the CloudEvent as delivered', cloudEventSchema],
      errors: [404],
    },
    ({ ctx, orgId, params }) => svc.getEvent(ctx, orgId, params.event_id),
  ),
  readRoute(
    {
      operationId: 'getEventRecipients',
      path: '/v1/events/{event_id}/recipients',
      tag,
      summary: 'Which webhooks of the org the event goes to now, and what decided (CONTRACT 10.2)',
      ok: ['every webhook of the org, newest first', recipientsSchema],
      errors: [404],
    },
    ({ ctx, orgId, params }) => ({ data: eventRecipients(ctx, orgId, params.event_id) }),
  ),
];
