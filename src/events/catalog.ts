// The event catalog (CONTRACT 10.3, issue 54): every type svc sends to a URL, with the schema of its
// whole CloudEvent, made from the same zod schemas that build the events' `data` (kinds/, and the
// verification request beside its builder), what the type means, its subject's shape, and an
// example built by the builders of the real events. One source: the API's schema documents and
// examples, the dashboard's page, the filters' path check and the tests' validation all read it here.
import { z } from 'zod';
import { dataschemaFor, toCloudEvent, type CloudEvent } from './cloudevent.ts';
import { KINDS, type EventRoutes } from './kinds/index.ts';
import { EXAMPLE } from './kinds/shared.ts';
import { VERIFICATION_CATALOG, VERIFICATION_TYPE, verificationDataSchema, verificationEvent } from './verification-request.ts';

/**
 * The CloudEvents attributes every svc event carries around its `data` (CONTRACT 6.2, 10.1, 10.3);
 * `svckind` and `svctransition` mirror `data.kind` and `data.transition`, so they take their schemas.
 */
function envelopeSchema(type: string, data: z.ZodType) {
  // every data schema is eventDataSchema's object (kinds/shared.ts), kind and transition first
  const { kind, transition } = (data as z.ZodObject).shape;
  if (!kind || !transition) throw new Error(`the data schema of ${type} has no kind or transition`);
  return z.strictObject({
    specversion: z.literal('1.0'),
    id: z.string(),
    type: z.literal(type),
    source: z.string(),
    time: z.string(),
    subject: z.string(),
    datacontenttype: z.literal('application/json'),
    /** the absolute URL of this schema (CONTRACT 10.3) */
    dataschema: z.string(),
    svcorgid: z.string(),
    svckind: kind,
    svctransition: transition,
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

/** Where and for whom an example is made: the URLs of this svc (as its events carry them), the org, the id and time. */
export interface ExampleOptions {
  /** --base-url, without a trailing slash */
  baseUrl: string;
  /** `//<authority>/ctl-api` (sourceFor) */
  source: string;
  dashboardUrl: string;
  /** the org the example is of; the examples' own org when omitted */
  orgId?: string;
  /** the CloudEvents id; EXAMPLE_EVENT_ID when omitted */
  id?: string;
  /** the event's time (ISO 8601); the examples' own when omitted */
  time?: string;
}

/** The id of the catalog's listed examples (a UUID v7 of their time), so that the listing is the same at every request. */
export const EXAMPLE_EVENT_ID = '019bc0fd-89c0-7000-8000-00000000e9a1';

/** One type of the catalog. */
export interface EventType {
  type: string;
  /** what an event of this type says, for a receiver's author */
  description: string;
  /** its subject with the variable parts named (CONTRACT 6.2), e.g. `<org>/workflow/<workflow>/<transition>` */
  subject_pattern: string;
  /** the zod schema of the whole CloudEvent */
  schema: z.ZodType;
  /** every resource and `event:` slug its events can have for interests (none: never sent by interests) */
  routes: EventRoutes;
  /** an event of this type, made by the builder of the real ones from a representative fact (it validates against `schema`) */
  example(o: ExampleOptions): CloudEvent;
}

function catalogOf(): ReadonlyMap<string, EventType> {
  const types = new Map<string, EventType>();
  for (const kind of Object.values(KINDS)) {
    const c = kind.catalog;
    types.set(kind.type, {
      type: kind.type,
      description: c.description,
      subject_pattern: c.subject_pattern,
      schema: envelopeSchema(kind.type, kind.data.schema),
      routes: kind.routes,
      example: (o) => {
        const fact = { ...c.example, org_id: o.orgId ?? c.example.org_id, time: o.time ?? c.example.time };
        const ev = toCloudEvent(fact, { source: o.source, baseUrl: o.baseUrl, dashboardUrl: o.dashboardUrl, id: o.id ?? EXAMPLE_EVENT_ID });
        // a kind's example is a fact that makes an event (test/events/catalog.test.ts checks every one)
        if (!ev) throw new Error(`the example of ${kind.type} makes no event`);
        return ev;
      },
    });
  }
  const v = VERIFICATION_CATALOG;
  types.set(VERIFICATION_TYPE, {
    type: VERIFICATION_TYPE,
    description: v.description,
    subject_pattern: v.subject_pattern,
    schema: envelopeSchema(VERIFICATION_TYPE, verificationDataSchema),
    // sent to a run's verification URLs only, never to webhooks
    routes: { resources: [], events: [] },
    example: (o) =>
      verificationEvent(
        { ...v.example, org_id: o.orgId ?? EXAMPLE.org, time: o.time ?? EXAMPLE.time },
        { source: o.source, baseUrl: o.baseUrl, dashboardUrl: o.dashboardUrl, id: o.id ?? EXAMPLE_EVENT_ID },
      ),
  });
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

/**
 * The schema document `GET /v1/event-types/{type}/schema` serves: the JSON Schema with its own
 * absolute URL as `$id` (what every event of the type carries as `dataschema`), the type as its
 * title, and the catalog's description.
 */
export function schemaDocument(type: string, baseUrl: string): Record<string, unknown> | undefined {
  const schema = cloudEventJsonSchema(type);
  const entry = EVENT_TYPES.get(type);
  if (!schema || !entry) return undefined;
  const { $schema, ...rest } = schema;
  return { $schema, $id: dataschemaFor(baseUrl, type), title: type, description: entry.description, ...rest };
}

/** One entry of `GET /v1/event-types` (CONTRACT 10.3). */
export interface EventTypeEntry {
  type: string;
  description: string;
  subject_pattern: string;
  schema_url: string;
  example: CloudEvent;
}

/** The catalog as `GET /v1/event-types` lists it, in the order of KINDS, the verification request last. */
export function eventTypeEntries(o: ExampleOptions): EventTypeEntry[] {
  return [...EVENT_TYPES.values()].map((t) => ({
    type: t.type,
    description: t.description,
    subject_pattern: t.subject_pattern,
    schema_url: dataschemaFor(o.baseUrl, t.type),
    example: t.example(o),
  }));
}
