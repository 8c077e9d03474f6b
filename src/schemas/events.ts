// The org's kept events (CONTRACT 4.5). In: the list's query. Out: a CloudEvent as delivered, a page of them.
import { z } from 'zod';
import { apiSchemas, pagedQuery, pageOf } from './common.ts';

export const eventListQuerySchema = pagedQuery('kept events emitted at or after', 'events emitted before', {
  type: z.string().min(1).max(200).describe('the CloudEvents type').optional(),
  subject_prefix: z.string().min(1).max(1000).describe('the CloudEvents subject starts with this').optional(),
  order_key: z
    .string()
    .min(1)
    .max(200)
    .describe('only the events of this ordering key (svcorderkey), in sequence order (CONTRACT 10.1)')
    .optional(),
  after_sequence: z
    .string()
    .regex(/^\d{1,16}$/, 'a whole number')
    .transform(Number)
    .describe('with order_key: only the events whose sequence is above this')
    .optional(),
});

export const cloudEventSchema = z
  .looseObject({
    specversion: z.string(),
    id: z.string(),
    source: z.string(),
    type: z.string(),
    subject: z.string().optional(),
    time: z.string().optional(),
  })
  .register(apiSchemas, { id: 'CloudEvent', description: 'a CloudEvent exactly as delivered (CONTRACT 6.2)' });

export const eventPageSchema = pageOf(cloudEventSchema, 'EventPage');
