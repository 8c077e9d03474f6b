// CONTRACT 10.3: the event catalog, every type svc sends to a URL with the JSON Schema of its whole
// CloudEvent and an example (src/events/catalog.ts).
import * as svc from '../../services/event-types.ts';
import { readRoute, reply, defineRoute } from '../api-route.ts';
import { eventTypeListSchema, jsonSchemaDocumentSchema } from '../../schemas/event-types.ts';

const tag = 'event-types';

export const eventTypeRoutes = [
  readRoute(
    {
      operationId: 'listEventTypes',
      path: '/v1/event-types',
      tag,
      summary: 'Every type of event svc sends to a URL, pings and verification requests included',
      description:
        "Each with what it says, its subject's pattern, the URL of its JSON Schema (what its events carry as `dataschema`) " +
        "and an example made by the code that makes the real events, of the caller's org.",
      ok: ['the types', eventTypeListSchema],
      errors: [],
    },
    ({ ctx, orgId }) => svc.listEventTypes(ctx, orgId),
  ),
  defineRoute({
    operationId: 'getEventTypeSchema',
    method: 'get',
    path: '/v1/event-types/{type}/schema',
    tag,
    scope: 'public',
    summary: "The JSON Schema of a type's whole CloudEvent (no authentication)",
    description:
      'Draft 2020-12, `data` included, generated from the schemas that build the events; its `$id` is this URL, which every ' +
      'event of the type carries as `dataschema`. Attributes some events lack (`sequence` on a ping) are optional in it.',
    responses: { 200: { description: 'the JSON Schema', schema: jsonSchemaDocumentSchema } },
    errors: [404],
    handle: ({ ctx, params }) => reply.ok(svc.eventTypeSchema(ctx, params.type)),
  }),
];
