// The event catalog (CONTRACT 10.3). Out: the list of types, each with its description, subject
// pattern, schema URL and example; a type's JSON Schema document. In: the type an example is sent of.
import { z } from 'zod';
import { apiSchemas } from './common.ts';
import { cloudEventSchema } from './events.ts';

export const eventTypeSchema = z
  .strictObject({
    type: z.string().describe('the CloudEvents type'),
    description: z.string(),
    subject_pattern: z.string().describe('the CloudEvents subject, its variable parts named: `<org>/workflow/<workflow>/<transition>`'),
    schema_url: z.string().describe("the JSON Schema of the type's whole CloudEvent (what its events carry as `dataschema`)"),
    example: cloudEventSchema,
  })
  .register(apiSchemas, { id: 'EventType', description: 'a type of event svc sends to a URL (CONTRACT 10.3)' });

export const eventTypeListSchema = z.array(eventTypeSchema);

export const jsonSchemaDocumentSchema = z
  .looseObject({ $schema: z.string(), $id: z.string(), title: z.string(), type: z.literal('object') })
  .register(apiSchemas, {
    id: 'CloudEventJsonSchema',
    description: 'the JSON Schema (draft 2020-12) of the whole CloudEvent of one type, `data` included',
  });

export const exampleBodySchema = z.strictObject({
  type: z.string().min(1).max(200).describe('the CloudEvents type of the example (GET /v1/event-types lists them)'),
});
