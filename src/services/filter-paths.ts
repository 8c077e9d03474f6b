// The catalog's check of a filter on write (CONTRACT 10.2): a path that no event type the webhook's
// interests admit can have is refused, naming the path and why. The types' shapes come from the
// catalog's JSON Schemas (src/events/catalog.ts, one source); which types the interests admit is
// asked of the same interestsAdmit dispatch runs (src/dispatch/interests.ts), over the routes each
// type can have.
//
// A type is admitted when any route it can have is (an over-approximation: a lifecycle type is
// tried with every workflow resource and op, since which resource a workflow classifies to depends
// on the workflow's type); a `{}` schema (an approval's `plan`) admits any path below it.
import { checkFilter, filterFields, type EventFilter } from '../domain/event-filter.ts';
import type { ErrorDetail } from '../domain/errors.ts';
import { RESOURCE_OPS, type Interests } from '../domain/subscription.ts';
import { interestsAdmit, type RoutedEvent } from '../dispatch/interests.ts';
import { cloudEventJsonSchema, EVENT_TYPES } from '../events/catalog.ts';

function routesOf(type: string): RoutedEvent[] {
  const r = EVENT_TYPES.get(type)?.routes;
  if (!r) return [];
  const out: RoutedEvent[] = [];
  for (const resource of r.resources) {
    // a runner's own health events have the ops unhealthy and inactive; its workflows the others
    const ops = (RESOURCE_OPS[resource] as readonly string[]).filter((op) =>
      op === 'unhealthy' || op === 'inactive' ? r.events.includes(`runner.${op}`) : !r.events[0]?.startsWith('runner.'),
    );
    for (const op of ops) for (const event of r.events) out.push({ resource, op, event });
  }
  return out;
}

/** The catalog types whose events the interests can admit. `implicit`: none were given (CONTRACT 4.1). */
export function admittedTypes(interests: Interests, implicit = false): string[] {
  return [...EVENT_TYPES.keys()].filter((t) => routesOf(t).some((route) => interestsAdmit(interests, route, implicit)));
}

type Schema = Record<string, unknown>;

/** Whether a JSON Schema (the catalog's, draft 2020-12) lets a value have the path `fields`. */
function schemaHas(schema: Schema | boolean | undefined, fields: readonly string[]): boolean {
  if (schema === true) return true;
  if (schema === undefined || schema === false) return false;
  if (fields.length === 0) return true;
  for (const key of ['anyOf', 'oneOf', 'allOf'] as const) {
    const branches = schema[key];
    if (Array.isArray(branches)) return branches.some((b) => schemaHas(b as Schema, fields));
  }
  const types = schema.type === undefined ? null : ([] as unknown[]).concat(schema.type);
  // an open schema ({}: any JSON value, such as an approval's plan): any path below it
  if (types === null && schema.properties === undefined && schema.items === undefined) return true;
  const [head, ...rest] = fields;
  if (head === '[]') return types?.includes('array') === true && schemaHas(schema.items as Schema | undefined, rest);
  if (types !== null && !types.includes('object')) return false;
  const props = (schema.properties ?? {}) as Record<string, Schema>;
  if (Object.hasOwn(props, head)) return schemaHas(props[head], rest);
  const extra = schema.additionalProperties;
  if (extra === undefined || extra === true) return true;
  return typeof extra === 'object' && extra !== null && schemaHas(extra as Schema, rest);
}

/**
 * The problems of a filter for a webhook with these interests: its shape and bounds
 * (checkFilter), then each path no admitted type has. Paths are `filter.<clause path>`.
 */
export function filterProblems(filter: EventFilter, interests: Interests, implicit = false): ErrorDetail[] {
  const shape = checkFilter(filter);
  if (shape.length) return shape.map((i) => ({ path: i.path ? `filter.${i.path}` : 'filter', message: i.message }));
  const types = admittedTypes(interests, implicit);
  const schemas = types.map((t) => cloudEventJsonSchema(t)!);
  const out: ErrorDetail[] = [];
  for (const f of filterFields(filter)) {
    if (schemas.some((s) => schemaHas(s, f.fields))) continue;
    const path = f.fields.join('.').replaceAll('.[]', '[]');
    out.push({
      path: `filter.${f.at}`,
      message: types.length
        ? `no event type these interests admit has ${path} (admitted: ${types.join(', ')}; see GET /v1/event-types/{type}/schema)`
        : 'these interests admit no event type that a filter applies to',
    });
  }
  return out;
}
