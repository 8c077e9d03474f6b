// One definition per /v1 route: method, path, path parameters, request body schema, response
// schemas and handler. mountRoutes() serves the definitions; src/http/openapi.ts documents the same
// definitions, so the document cannot drift from what is served (CONTRACT 4.4).
import type { Context, Hono } from 'hono';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import { z } from 'zod';
import type { AppContext } from '../context.ts';
import { allows, type Actor, type AuditEntry, type Scope } from '../domain/scopes.ts';
import type { AuthEnv, Caller } from './auth.ts';
import { forbidden, HttpError, toHttpError } from './http-error.ts';
import { invalid, issuesToDetails, readJson } from './validation.ts';

export type Method = 'get' | 'post' | 'put' | 'patch' | 'delete';
export type WriteMethod = Exclude<Method, 'get'>;
export type SuccessStatus = 200 | 201 | 202 | 204;
/** The CONTRACT 3 statuses a route may answer with (401 and 403 are added to every authenticated route). */
export type ErrorStatus = 400 | 404 | 409;

export interface ResponseDef {
  description: string;
  /** null: no body (204) */
  schema: z.ZodType | null;
}

export type Responses = { [S in SuccessStatus]?: ResponseDef };

type BodyOf<D> = D extends { schema: infer S extends z.ZodType } ? z.input<S> : null;

/** What a handler returns: one of the route's success statuses and a body its schema accepts. */
export type Reply<R extends Responses> = { [S in keyof R & SuccessStatus]: { status: S; body: BodyOf<R[S]> } }[keyof R & SuccessStatus];

/** `/v1/installs/{install_id}/components/{component_id}` → 'install_id' | 'component_id' */
export type PathParams<P extends string> = P extends `${string}{${infer Name}}${infer Rest}` ? Name | PathParams<Rest> : never;

export interface RouteArgs<Path extends string> {
  ctx: AppContext;
  c: Context<AuthEnv>;
  /** the authenticated org (empty on public routes) */
  orgId: string;
  /** who sends the request (the token; null on public routes): the actor of what it changes */
  actor: Actor | null;
  params: { [K in PathParams<Path>]: string };
}

/** Query parameters: each a string as given in the URL (zod turns them into what the handler gets). */
export type QuerySchema = z.ZodObject<Record<string, z.ZodType<unknown, string | undefined>>>;

interface RouteCommon<Path extends string, B extends z.ZodType, R extends Responses, Q extends QuerySchema> {
  operationId: string;
  /** the OpenAPI path, `{name}` for a path parameter */
  path: Path;
  summary: string;
  description?: string;
  tag: string;
  /**
   * What a token needs to call it (CONTRACT 2): enforced by the router (403 naming the scope),
   * stated by the OpenAPI document; `public`: served without authentication. Required, so that no
   * route can be added without saying who may call it.
   */
  scope: Scope | 'public';
  /**
   * The request body schema. `optional`: an absent body reads as `{}`. Read with readJson
   * (CONTRACT 3: 415, malformed JSON 400, `__proto__` 400, unknown fields 400 by path).
   */
  body?: { schema: B; optional?: boolean };
  /** the query parameters (a strict object: an unknown one is 400, CONTRACT 3) */
  query?: Q;
  responses: R;
  /** error statuses besides 401/403 (and 413/415 of routes with a body) */
  errors: ErrorStatus[];
  /** checks made before the body is read: a missing resource is 404 before its body is 400 */
  before?: (a: RouteArgs<Path>) => void;
}

type HandlerArgs<Path extends string, B extends z.ZodType, Q extends QuerySchema> = RouteArgs<Path> & {
  body: z.output<B>;
  query: z.output<Q>;
};

/** How the audit log names a write (CONTRACT 2): its action, and what it created or changed. */
export interface AuditDef<R extends Responses, B extends z.ZodType> {
  /** `webhooks.create`, `rollbacks.create`, `steps.approve`, … */
  action: string;
  /** the action of this request when its body names it (an approval answered `rejected`: `steps.reject`) */
  actionOf?: (body: z.output<B>) => string;
  /** the kind of resource: `webhook`, `rollback`, `step`, … */
  resource: string;
  /** its id in the reply (what was created); default: the last path parameter */
  id?: (reply: Reply<R>) => string | null | undefined;
  /** a reply that changed nothing (a plan_only answer): a read, not kept (the store stays as it was) */
  unchanged?: (reply: Reply<R>) => boolean;
}

export type RouteDef<Path extends string, B extends z.ZodType, R extends Responses, Q extends QuerySchema, P = undefined> = RouteCommon<
  Path,
  B,
  R,
  Q
> &
  (
    | { method: 'get'; handle: (a: HandlerArgs<Path, B, Q>) => Reply<R> | Promise<Reply<R>> }
    | {
        method: WriteMethod;
        audit: AuditDef<R, B>;
        /**
         * The change, synchronous: it runs in one engine transaction with its audit row (src/engine/
         * engine.ts change), so that neither commits without the other.
         */
        /**
         * I/O the change depends on, before it (a ping that must succeed first): a refusal here is
         * kept like any other; what it returns reaches `handle` as `prepared`.
         */
        prepare?: (a: HandlerArgs<Path, B, Q>) => Promise<P>;
        handle: (a: HandlerArgs<Path, B, Q> & { prepared: P }) => Reply<R>;
        /** I/O after the change has committed (a ping, a wait): the reply it returns is what is answered */
        settle?: (a: HandlerArgs<Path, B, Q>, committed: Reply<R>) => Promise<Reply<R>>;
      }
  );

/** A route definition with its types erased, as the router and the document see it. */
export interface ApiRoute {
  operationId: string;
  method: Method;
  path: string;
  summary: string;
  description?: string;
  tag: string;
  scope: Scope | 'public';
  /** served without authentication (scope `public`) */
  public: boolean;
  /** writes: how the audit log names them */
  audit?: AuditDef<Responses, z.ZodType>;
  /** the path parameters, `{name}` of the path, each a non-empty string */
  params: z.ZodObject<Record<string, z.ZodString>>;
  paramNames: string[];
  body?: { schema: z.ZodType; optional?: boolean };
  query?: QuerySchema;
  responses: Responses;
  errors: ErrorStatus[];
  before?: (a: RouteArgs<string>) => void;
  handle: (
    a: RouteArgs<string> & { body: unknown; query: unknown; prepared?: unknown },
  ) => { status: SuccessStatus; body: unknown } | Promise<{ status: SuccessStatus; body: unknown }>;
  prepare?: (a: RouteArgs<string> & { body: unknown; query: unknown }) => Promise<unknown>;
  settle?: (
    a: RouteArgs<string> & { body: unknown; query: unknown },
    committed: { status: SuccessStatus; body: unknown },
  ) => Promise<{ status: SuccessStatus; body: unknown }>;
}

/** A path parameter: the API's ids are matched as given (an unknown or malformed id is a 404). */
export const pathParamSchema = z.string().min(1);

export function defineRoute<
  const Path extends string,
  B extends z.ZodType = z.ZodNever,
  const R extends Responses = Responses,
  // biome-ignore lint/complexity/noBannedTypes: zod's own type of an object schema with no keys
  Q extends QuerySchema = z.ZodObject<{}>,
  P = undefined,
>(def: RouteDef<Path, B, R, Q, P>): ApiRoute {
  if (!def.path.startsWith('/v1/')) throw new Error(`route ${def.operationId}: path must start with /v1/`);
  const paramNames = [...def.path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]);
  const params = z.strictObject(Object.fromEntries(paramNames.map((n) => [n, pathParamSchema])));
  if (def.method !== 'get' && def.scope === 'public')
    throw new Error(`route ${def.operationId}: a write cannot be public (it has an actor)`);
  return { ...(def as unknown as Omit<ApiRoute, 'params' | 'paramNames' | 'public'>), public: def.scope === 'public', params, paramNames };
}

/** What a read states: a GET answered 200 with one body, scope `read` unless it names another. */
export interface ReadDef<Path extends string, S extends z.ZodType, Q extends QuerySchema> {
  operationId: string;
  path: Path;
  tag: string;
  summary: string;
  description?: string;
  scope?: Scope;
  query?: Q;
  /** the 200 answer: its description and its schema */
  ok: [description: string, schema: S];
  errors: ErrorStatus[];
}

/** A read: `load`'s result is the 200 body (the shape most GET routes share). */
export function readRoute<
  const Path extends string,
  S extends z.ZodType,
  // biome-ignore lint/complexity/noBannedTypes: zod's own type of an object schema with no keys
  Q extends QuerySchema = z.ZodObject<{}>,
>(def: ReadDef<Path, S, Q>, load: (a: HandlerArgs<Path, z.ZodNever, Q>) => z.input<S>): ApiRoute {
  const { ok, scope, ...rest } = def;
  return defineRoute<Path, z.ZodNever, { 200: { description: string; schema: S } }, Q>({
    ...rest,
    method: 'get',
    scope: scope ?? 'read',
    responses: { 200: { description: ok[0], schema: ok[1] } },
    handle: (a) => reply.ok(load(a)),
  });
}

/**
 * What a route that creates something states: its audit (the action, the kind of resource, and its
 * id: the `key` field of the answer) and its 201 with the new record.
 */
export const creates = <const K extends string, S extends z.ZodType>(
  action: string,
  resource: string,
  key: K,
  description: string,
  schema: S,
) => ({
  audit: { action, resource, id: (r: { body: { [k in K]: string } }) => r.body[key] },
  responses: { 201: { description, schema } },
});

/** A delete: `remove` runs in the change, then 204 with no body; 404 when there is nothing to remove. */
export function deleteRoute<const Path extends string>(def: {
  operationId: string;
  path: Path;
  tag: string;
  scope: Scope;
  audit: { action: string; resource: string };
  summary: string;
  remove: (a: RouteArgs<Path>) => void;
}): ApiRoute {
  const { remove, ...rest } = def;
  return defineRoute<Path, z.ZodNever, { 204: { description: string; schema: null } }>({
    ...rest,
    method: 'delete',
    responses: { 204: { description: 'deleted', schema: null } },
    errors: [404],
    handle: (a) => {
      remove(a);
      return reply.noContent();
    },
  });
}

/** The route a request is for (the audit log names a refused write by its operation), if any. */
export function findRoute(routes: readonly ApiRoute[], method: string, path: string): ApiRoute | undefined {
  const m = method.toLowerCase();
  return routes.find((r) => r.method === m && routePattern(r).test(path));
}

const patterns = new WeakMap<ApiRoute, RegExp>();
function routePattern(r: ApiRoute): RegExp {
  let re = patterns.get(r);
  if (!re) {
    const src = r.path
      .split(/\{\w+\}/)
      .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
      .join('[^/]+');
    re = new RegExp(`^${src}/?$`);
    patterns.set(r, re);
  }
  return re;
}

/**
 * The 403 of a token whose scope does not cover the route (CONTRACT 2, 7): it names the scope needed
 * and the route as a caller writes it (method and path template), never an internal operation id:
 * `POST /v1/orgs/current/webhooks needs scope webhooks or admin; this token has scope read`.
 */
export function checkScope(route: Pick<ApiRoute, 'scope' | 'method' | 'path'>, caller: Caller): void {
  if (route.scope === 'public' || allows(caller.scope, route.scope)) return;
  const need = route.scope === 'read' || route.scope === 'admin' ? `scope ${route.scope}` : `scope ${route.scope} or admin`;
  throw forbidden(`${route.method.toUpperCase()} ${route.path} needs ${need}; this token has scope ${caller.scope}`);
}

/** The audit row of a write (refused or not): its action and resource, as the route names them. */
export function auditEntry(
  route: ApiRoute,
  caller: Caller,
  o: { status: number; params?: Record<string, string>; body?: unknown; reply?: { status: SuccessStatus; body: unknown } },
) {
  const a = route.audit;
  const lastParam = route.paramNames.length && o.params ? (o.params[route.paramNames[route.paramNames.length - 1]] ?? null) : null;
  let action = a?.action ?? `${route.method}.${route.operationId}`;
  if (a?.actionOf && o.body !== undefined) action = a.actionOf(o.body);
  const fromReply = a?.id && o.reply ? a.id(o.reply as never) : undefined;
  return {
    org_id: caller.org_id,
    actor: caller.actor,
    action,
    resource_type: a?.resource ?? null,
    resource_id: fromReply ?? lastParam,
    status: o.status,
  };
}

/**
 * A success body already serialised from data that was checked against its schema when it was
 * stored (a page of kept CloudEvents): sent as it is, not parsed, checked and serialised again.
 */
export class JsonText {
  constructor(readonly text: string) {}
}

export const reply = {
  ok: <T>(body: T) => ({ status: 200 as const, body }),
  /** 200 with a body of JsonText, typed as the route's documented body */
  okJsonText: <T>(text: string) => ({ status: 200 as const, body: new JsonText(text) as unknown as T }),
  created: <T>(body: T) => ({ status: 201 as const, body }),
  accepted: <T>(body: T) => ({ status: 202 as const, body }),
  noContent: () => ({ status: 204 as const, body: null }),
};

/** `/v1/installs/{install_id}` → `/installs/:install_id` (relative to the /v1 router). */
export const honoPath = (path: string) => path.slice('/v1'.length).replace(/\{(\w+)\}/g, ':$1');

/** Serve each route on `router` (mounted at /v1). */
export function mountRoutes(router: Hono<AuthEnv>, ctx: AppContext, routes: readonly ApiRoute[]): void {
  for (const route of routes) {
    router.on(route.method.toUpperCase(), honoPath(route.path), async (c) => {
      const caller = route.public ? null : c.get('caller');
      if (!caller || route.method === 'get') return respond(c, ctx, route, await run(c, ctx, route, caller));
      // a write: the change and its audit row in one transaction (in run); a refused one is kept too (CONTRACT 2)
      try {
        return respond(c, ctx, route, await run(c, ctx, route, caller));
      } catch (err) {
        keepRefused(ctx, () => auditEntry(route, caller, { status: toHttpError(err).status, params: c.req.param() }));
        throw err;
      }
    });
  }
}

/**
 * Keep a refused write in the audit log, in a transaction of its own (nothing was changed). A
 * failure to keep it (the store itself failing) is logged and does not replace the refusal.
 */
export function keepRefused(ctx: AppContext, entry: () => AuditEntry): void {
  try {
    ctx.engine.change((t) => t.audit(entry()));
  } catch (err) {
    ctx.logger.error({ err }, 'could not keep a refused write in the audit log');
  }
}

async function run(
  c: Context<AuthEnv>,
  ctx: AppContext,
  route: ApiRoute,
  caller: Caller | null,
): Promise<{ status: SuccessStatus; body: unknown }> {
  if (caller) checkScope(route, caller);
  const p = route.params.safeParse(c.req.param());
  if (!p.success) throw invalid(issuesToDetails(p.error.issues));
  const args: RouteArgs<string> = { ctx, c, orgId: caller ? c.get('orgId') : '', actor: caller?.actor ?? null, params: p.data };
  route.before?.(args);
  let query: unknown = {};
  if (route.query) {
    const q = route.query.strict().safeParse(c.req.query());
    if (!q.success) throw invalid(issuesToDetails(q.error.issues));
    query = q.data;
  }
  const body = route.body ? await readJson(c, route.body.schema, route.body.optional ? {} : undefined) : undefined;
  const full = { ...args, body, query };
  if (route.method === 'get' || !caller) return route.handle(full);
  const prepared = route.prepare ? await route.prepare(full) : undefined;
  const out = ctx.engine.change((t) => {
    const reply = route.handle({ ...full, prepared });
    if (reply instanceof Promise) throw new Error(`route ${route.operationId}: a write's handle must be synchronous (I/O goes in settle)`);
    if (route.audit?.unchanged?.(reply as never)) return reply;
    t.audit(auditEntry(route, caller, { status: reply.status, params: p.data, body, reply }));
    return reply;
  });
  return route.settle ? route.settle(full, out) : out;
}

/** Send a success body through its documented schema: what is not in the schema does not go out. */
function respond(c: Context, ctx: AppContext, route: ApiRoute, out: { status: SuccessStatus; body: unknown }): Response {
  const def = route.responses[out.status];
  if (!def) {
    ctx.logger.error({ operation: route.operationId, status: out.status }, 'response status is not documented');
    throw new HttpError(500, 'internal', 'internal error');
  }
  if (def.schema === null) return c.body(null, out.status as 204);
  if (out.body instanceof JsonText)
    return c.body(out.body.text, out.status as ContentfulStatusCode, { 'content-type': 'application/json' });
  return c.json(documented(ctx, route.operationId, def.schema, out.body), out.status as ContentfulStatusCode);
}

/**
 * A value through its documented schema, as a response sends it: what is not in the schema does not
 * go out (logged), and a value that does not match is a 500 (logged with the issues). A route that
 * answers with a large list checks it an element at a time with this, in turns (CONTRACT §8), and
 * sends the text as JsonText.
 */
export function documented<T>(ctx: AppContext, operationId: string, schema: z.ZodType<T>, value: unknown): T {
  const r = schema.safeParse(value);
  if (!r.success) {
    const issues = r.error.issues.map((i) => ({ path: i.path.map(String).join('.'), message: i.message }));
    ctx.logger.error({ operation: operationId, issues }, 'response does not match its documented schema');
    throw new HttpError(500, 'internal', 'internal error');
  }
  const dropped = droppedFields(value, r.data);
  if (dropped.length)
    ctx.logger.error({ operation: operationId, dropped }, 'response fields missing from the documented schema were left out');
  return r.data;
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/** Paths of the fields of `before` (with a value) that shaping left out of `after`. */
export function droppedFields(before: unknown, after: unknown, path = ''): string[] {
  const out: string[] = [];
  if (Array.isArray(before) && Array.isArray(after)) {
    before.forEach((x, i) => out.push(...droppedFields(x, after[i], `${path}[${i}]`)));
  } else if (isObject(before) && isObject(after)) {
    for (const [k, v] of Object.entries(before)) {
      const p = path ? `${path}.${k}` : k;
      if (!(k in after)) {
        if (v !== undefined) out.push(p);
      } else out.push(...droppedFields(v, after[k], p));
    }
  }
  return out;
}
