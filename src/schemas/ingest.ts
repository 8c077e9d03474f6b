// Durable ingest's late refusals (CONTRACT 9). In: the list's query. Out: a refusal, a page of them.
import { z } from 'zod';
import { apiSchemas, described, pageCursor, pageLimit, pageOf } from './common.ts';

export const ingestRejectionListQuerySchema = z.object({
  after: pageCursor.optional(),
  limit: pageLimit.optional(),
});

export const ingestRejectionSchema = z
  .object({
    subject: described(z.string(), 'the NATS subject the fact was sent on (svc.ingest.…)'),
    received_at: described(z.string(), 'when svc received the fact and stored it (ISO 8601)'),
    error: described(z.string(), 'why the engine refused it when it applied it'),
    fact: described(z.unknown(), 'the message body as received: its JSON when it parses, else the text'),
  })
  .register(apiSchemas, {
    id: 'IngestRejection',
    description: 'a fact acknowledged at ingest and refused later by the engine (CONTRACT 9)',
  });

export const ingestRejectionPageSchema = pageOf(ingestRejectionSchema, 'IngestRejectionPage');
