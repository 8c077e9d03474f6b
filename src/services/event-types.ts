// The event catalog (CONTRACT 10.3) as the API and the dashboard serve it: src/events/catalog.ts
// with this svc's URLs (its `--base-url`, its events' `source`, the dashboard's URL).
import type { z } from 'zod';
import type { AppContext } from '../context.ts';
import { EVENT_TYPES, eventTypeEntries, schemaDocument } from '../events/catalog.ts';
import { NotFoundError } from '../domain/errors.ts';
import type { eventTypeListSchema, jsonSchemaDocumentSchema } from '../schemas/event-types.ts';

/** Every type, with examples of the org `orgId` (the examples' own org when empty). */
export function listEventTypes(ctx: AppContext, orgId: string): z.input<typeof eventTypeListSchema> {
  // an example is a CloudEvent: the API's CloudEvent schema is any object with its attributes
  return eventTypeEntries({ ...urlsOf(ctx), ...(orgId ? { orgId } : {}) }).map((e) => ({ ...e, example: { ...e.example } }));
}

/** The JSON Schema document of a type (404 for a type svc does not send). */
export function eventTypeSchema(ctx: AppContext, type: string): z.input<typeof jsonSchemaDocumentSchema> {
  const doc = schemaDocument(type, ctx.urls.base);
  if (!doc) throw new NotFoundError('event type', type);
  return doc as z.input<typeof jsonSchemaDocumentSchema>;
}

/** The types svc sends, as a 400 names them. */
export const knownTypes = (): string => [...EVENT_TYPES.keys()].join(', ');

function urlsOf(ctx: AppContext) {
  return { baseUrl: ctx.urls.base, source: ctx.urls.source, dashboardUrl: ctx.urls.dashboard };
}
