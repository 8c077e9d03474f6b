// The event catalog (CONTRACT 10.3, issue 54): every type svc sends, with the schema of its whole
// CloudEvent, made from the same zod schemas that build the events' `data` (kinds/). One source:
// the API's schema documents, the filters' path check and the tests' validation all read it here.
import { z } from 'zod';
import { KINDS } from './kinds/index.ts';

/** The CloudEvents attributes every svc event carries, `data` aside (CONTRACT 6.2, 10.1, 10.3). */
function envelopeSchema(type: string, data: z.ZodType) {
  return z.strictObject({
    specversion: z.literal('1.0'),
    id: z.string(),
    type: z.literal(type),
    source: z.string(),
    time: z.string(),
    subject: z.string(),
    datacontenttype: z.literal('application/json'),
    /** the absolute URL of this schema (CONTRACT 10.3) */
    dataschema: z.string().optional(),
    svcorgid: z.string(),
    svckind: z.string(),
    svctransition: z.string(),
    interests: z.array(z.string()),
    /** the ordering key (CONTRACT 10.1); pings and examples have none */
    svcorderkey: z.string().optional(),
    /** the CloudEvents sequence extension: 20 decimal digits, contiguous per org and key */
    sequence: z
      .string()
      .regex(/^\d{20}$/)
      .optional(),
    /** an example sent by POST …/examples or `svc trigger`, never kept */
    svcexample: z.literal(true).optional(),
    data,
  });
}

/** One type of the catalog. */
export interface EventType {
  type: string;
  /** the zod schema of the whole CloudEvent */
  schema: z.ZodType;
}

function catalogOf(): ReadonlyMap<string, EventType> {
  const types = new Map<string, EventType>();
  for (const kind of Object.values(KINDS)) types.set(kind.type, { type: kind.type, schema: envelopeSchema(kind.type, kind.data.schema) });
  return types;
}

/** Every type svc sends to a URL, by CloudEvents type. */
export const EVENT_TYPES: ReadonlyMap<string, EventType> = catalogOf();

const jsonSchemas = new Map<string, Record<string, unknown>>();

/** The JSON Schema (draft 2020-12) of the whole CloudEvent of a type; undefined for a type svc does not send. */
export function cloudEventJsonSchema(type: string): Record<string, unknown> | undefined {
  const known = jsonSchemas.get(type);
  if (known) return known;
  const entry = EVENT_TYPES.get(type);
  if (!entry) return undefined;
  const schema = z.toJSONSchema(entry.schema, { target: 'draft-2020-12' }) as Record<string, unknown>;
  jsonSchemas.set(type, schema);
  return schema;
}
