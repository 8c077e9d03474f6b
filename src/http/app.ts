import { Hono } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import type { AppContext } from '../context.ts';
import type { Context } from 'hono';
import { requireOrg, type AuthEnv, type Caller } from './auth.ts';
import { tokenOf } from '../services/api-tokens.ts';
import { errorResponse, HttpError, toHttpError } from './http-error.ts';
import { API_ROUTES } from './routes/index.ts';
import { auditEntry, findRoute, keepRefused, mountRoutes, type ApiRoute } from './api-route.ts';
import { renderMetrics } from '../metrics.ts';

export const MAX_BODY_BYTES = 1024 * 1024;

export function createHttpApp(ctx: AppContext): Hono {
  const app = new Hono();

  app.onError((err, c) => {
    const e = toHttpError(err);
    if (e.status >= 500) ctx.logger.error({ err: err instanceof Error ? err.message : String(err), path: c.req.path }, 'request failed');
    // An oversized body is left unread and the server drops the connection: say so, or a
    // keep-alive client reuses the socket for its next request and that request fails.
    if (e.status === 413) c.header('connection', 'close');
    return errorResponse(c, e);
  });
  app.notFound((c) => errorResponse(c, new HttpError(404, 'not_found', `no route for ${c.req.method} ${c.req.path}`)));

  app.get('/metrics', async (c) => {
    const m = await renderMetrics(ctx.metrics);
    return c.body(m.body, 200, { 'content-type': m.contentType });
  });
  // liveness: 200 while the process runs; readiness: 200 only while it should get traffic (CONTRACT 1)
  app.get('/healthz', (c) => c.json({ ok: true }));
  app.get('/readyz', (c) => {
    const { ready, reasons } = ctx.readiness.state();
    return ready ? c.json({ ready: true }, 200) : c.json({ ready: false, reasons }, 503);
  });

  const v1 = new Hono<AuthEnv>();
  v1.use(
    '*',
    bodyLimit({
      maxSize: MAX_BODY_BYTES,
      onError: (c) => {
        keepTooLarge(ctx, c);
        throw new HttpError(413, 'payload_too_large', 'request body is over 1 MiB');
      },
    }),
  );
  // every /v1 route comes from one definition that the OpenAPI document is generated from (CONTRACT 4.4)
  mountRoutes(
    v1,
    ctx,
    API_ROUTES.filter((r) => r.public),
  );
  // a 403 of a known token for a write is kept in the audit log (CONTRACT 2), named by the route it was for
  v1.use(
    '*',
    requireOrg(ctx, (c, caller, err) => {
      const route = c.req.method === 'GET' ? undefined : findRoute(API_ROUTES, c.req.method, c.req.path);
      if (route && !route.public) keepRefused(ctx, () => auditEntry(route, caller, { status: err.status }));
    }),
  );
  // an org's requests wait in its own queue and are started round robin with the other orgs' (CONTRACT 8)
  v1.use(
    '*',
    ctx.admission.middleware<AuthEnv>((c) => c.get('orgId')),
  );
  mountRoutes(
    v1,
    ctx,
    API_ROUTES.filter((r) => !r.public),
  );
  app.route('/v1', v1);

  return app;
}

/**
 * A write refused for its size (413, before the caller is authenticated: the body limit comes
 * first) is kept in the audit log like the other refused writes (CONTRACT 8): for the org of a
 * known token, named by the route it was for, with its status. Nothing of the body is read or kept.
 * A request without a known token has no org whose log could hold it (as a 401 has no actor).
 */
function keepTooLarge(ctx: AppContext, c: Context): void {
  if (c.req.method === 'GET' || c.req.method === 'HEAD') return;
  const route = findRoute(API_ROUTES, c.req.method, c.req.path);
  if (!route || route.public) return;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(c.req.header('authorization') ?? '');
  const token = m ? tokenOf(ctx, m[1]) : undefined;
  if (!token) return;
  const caller: Caller = { org_id: token.org_id, scope: token.scope, actor: { token_id: token.token_id, token_name: token.name } };
  keepRefused(ctx, () => auditEntry(route, caller, { status: 413, params: paramsOf(route, c.req.path) }));
}

/** The path parameters of a request for `route` (findRoute matched it): `{webhook_id}` → its segment. */
function paramsOf(route: ApiRoute, path: string): Record<string, string> {
  const names = route.path.split('/');
  const values = path.replace(/\/+$/, '').split('/');
  const out: Record<string, string> = {};
  names.forEach((n, i) => {
    const m = /^\{(\w+)\}$/.exec(n);
    if (m && values[i] !== undefined) {
      try {
        out[m[1]] = decodeURIComponent(values[i]);
      } catch {
        out[m[1]] = values[i];
      }
    }
  });
  return out;
}
