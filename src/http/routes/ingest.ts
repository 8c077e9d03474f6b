// CONTRACT 9 "Durable ingest": the facts the engine refused after they were acknowledged.
import * as svc from '../../services/ingest-rejections.ts';
import { readRoute } from '../api-route.ts';
import { ingestRejectionListQuerySchema, ingestRejectionPageSchema } from '../../schemas/ingest.ts';

export const ingestRoutes = [
  readRoute(
    {
      operationId: 'listIngestRejections',
      path: '/v1/ingest/rejections',
      tag: 'ingest',
      summary: "The org's facts refused by the engine after ingest acknowledged them, newest first",
      description:
        'A fact is acknowledged once the stream holds it; what only the engine can judge (a workflow id that belongs ' +
        'to a workflow the engine started) is refused when the engine applies it, and listed here: the subject, when it ' +
        'was received, the error, and the fact as received. Kept for --event-retention (default 7 days), the newest ' +
        '10,000 of each org.',
      query: ingestRejectionListQuerySchema,
      ok: ['a page of refusals', ingestRejectionPageSchema],
      errors: [400],
    },
    ({ ctx, orgId, query }) => svc.listIngestRejections(ctx, orgId, query),
  ),
];
