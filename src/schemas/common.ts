// What every resource's schemas share (CONTRACT 3, 4): the registry the OpenAPI document is made
// with, ids, names, labels, timestamps, pages and their queries, and the error body. One module per
// resource beside this one (./webhooks.ts, ./apps.ts, …) holds its In (request bodies and queries),
// Out (API responses) and View (what services hand the dashboard) schemas; services, the HTTP routes,
// the dashboard and the CLI import them from there. These modules import zod and src/domain only.
import { z } from 'zod';
import type { ErrorDetail } from '../domain/errors.ts';
import { labelsSchema } from '../domain/limits.ts';

/** The named schemas of the document's `components.schemas`: each registered with an id becomes `#/components/schemas/<id>`. */
export const apiSchemas = z.registry<{ id?: string; description?: string }>();

/** A description for the document (kept in `apiSchemas`, the registry the document is made with). */
export function described<S extends z.ZodType>(schema: S, description: string): S {
  apiSchemas.add(schema as z.ZodType, { description });
  return schema;
}

/** Same<A, B>: true when A and B are the same type (a schema and the type the code uses agree). */
export type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;

export const timestamp = described(z.string(), 'ISO 8601 timestamp');
/** Labels as a request sets them (within the limits of CONTRACT 8). */
export const labels = labelsSchema;
/** Labels as stored: read back without the limits of CONTRACT 8 (configs made before them still read). */
export const storedLabels = z.record(z.string(), z.string());
export const json = z.record(z.string(), z.unknown());
/** A name a request gives (an app, a branch, a group, a component, an install). */
export const name = z.string().trim().min(1).max(200);
/** An id a request names. */
export const id = z.string().min(1).max(64);
/** Whether a list names each item once. */
export const unique = <T>(list: T[]) => new Set(list).size === list.length;

export const selectorSchema = z.strictObject({
  match_labels: labels.refine((l) => Object.keys(l).length > 0, 'match_labels must not be empty'),
});

// ------------------------------------------------------------------ pages (CONTRACT 4.5)

export const timeBoundSchema = (what: string) =>
  z.string().min(1).max(64).describe(`${what}: an ISO 8601 time, or a duration back from now (e.g. 2h, 30m, 7d)`);
export const pageCursor = z.string().min(1).max(32).describe('the next_cursor of the previous page');
export const pageLimit = z
  .string()
  .regex(/^\d+$/, 'a whole number from 1 to 500')
  .transform(Number)
  .pipe(z.number().int().min(1, 'a whole number from 1 to 500').max(500, 'a whole number from 1 to 500'))
  .describe('page size, 1 to 500 (default 100)');

/** The query of a page of a time-ordered list: since and until (`<what> at or after`, `… before`), the filters, after and limit. */
export function pagedQuery<S extends z.ZodRawShape>(since: string, until: string, filters: S) {
  return z.object({
    since: timeBoundSchema(since).optional(),
    until: timeBoundSchema(until).optional(),
    ...filters,
    after: pageCursor.optional(),
    limit: pageLimit.optional(),
  });
}

const nextCursor = described(z.string().nullable(), 'pass as `after` for the next page; null on the last page');

/** A page of a list (`data` and `next_cursor`), registered as the component `id`. */
export function pageOf<S extends z.ZodType>(item: S, id: string) {
  return z.object({ data: z.array(item), next_cursor: nextCursor }).register(apiSchemas, { id });
}

// ------------------------------------------------------------------ errors (CONTRACT 3)

export const ERROR_CODES = [
  'invalid_request',
  'unauthorized',
  'forbidden',
  'not_found',
  'conflict',
  'limit_exceeded',
  'vetoed',
  'payload_too_large',
  'unsupported_media_type',
  'internal',
] as const;

export const errorDetailSchema = z
  .object({ path: described(z.string(), 'the field path, dotted (`(body)` for the body as a whole)'), message: z.string() })
  .register(apiSchemas, { id: 'ErrorDetail' });

export const errorSchema = z
  .object({
    error: z.enum(ERROR_CODES),
    message: z.string(),
    details: z.array(errorDetailSchema).optional(),
  })
  .register(apiSchemas, { id: 'Error', description: 'Every error response (CONTRACT 3)' });

// ------------------------------------------------------------------ the API description itself

export const openApiDocumentSchema = described(z.record(z.string(), z.unknown()), 'this OpenAPI 3.1 document');

const sameTypes: [Same<z.infer<typeof errorDetailSchema>, ErrorDetail>] = [true];
void sameTypes;
