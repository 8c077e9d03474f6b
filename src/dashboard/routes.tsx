// The dashboard (CONTRACT 7): server-rendered pages under the dashboard URL's path.
// Mounted lazily: the dashboard URL is known only once the server listens, so a catch-all
// middleware hands every request under that path to the dashboard app (built once per prefix).
import { Hono, type MiddlewareHandler } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import type { AppContext } from '../context.ts';
import { ApprovalRefusedError, ConflictError, ForbiddenError, InvalidError, NotFoundError } from '../domain/errors.ts';
import { pathsFor, prefixOf } from './paths.ts';
import { errorPage, notFoundPage } from './render.tsx';
import { getCookie } from 'hono/cookie';
import { formCsrf, loadSession, sameToken, SESSION_COOKIE, takeFlash, type DashEnv } from './session.ts';
import { sessionOf } from '../services/sessions.ts';
import { keepRefused } from '../http/api-route.ts';
import { STYLESHEET } from './styles.ts';
import { SCRIPT } from './script.ts';
import { registerLogin } from './pages/login.tsx';
import { registerApprovalLinks } from './pages/approval-link.tsx';
import { registerOverview } from './pages/overview.tsx';
import { registerInstalls } from './pages/installs.tsx';
import { registerWorkflows } from './pages/workflow.tsx';
import { registerWebhooks } from './pages/webhooks.tsx';
import { registerWatchdog } from './pages/watchdog.tsx';
import { registerHistory } from './pages/history.tsx';
import { registerSettings } from './pages/settings.tsx';
import { registerApprovals } from './pages/approvals.tsx';
import { registerApps } from './pages/apps.tsx';
import { registerAudit } from './pages/audit.tsx';
import { registerIngestRejections } from './pages/ingest-rejections.tsx';
import { registerEventTypes } from './pages/event-types.tsx';
import { countPendingApprovals } from '../services/approvals.ts';

const MAX_FORM_BYTES = 1024 * 1024;

const SECURITY_HEADERS: Record<string, string> = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; form-action " +
    "'self'; base-uri 'none'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'same-origin',
  'x-frame-options': 'DENY',
};

/**
 * A post refused for its size (413: a form over 1 MiB, a sign-in over 8 KiB, pages/login.tsx) is
 * kept in the audit log of the signed-in session's org, as the dashboard's other refused writes
 * are (CONTRACT 8): `dashboard.<method>` on the page's path, status 413, nothing of the body.
 * Without a session there is no org whose log could hold it (a sign-in is not audited either).
 */
const keepTooLarge =
  (ctx: AppContext, prefix: string): MiddlewareHandler<DashEnv> =>
  async (c, next) => {
    await next();
    if (c.res.status !== 413 || c.req.method === 'GET' || c.req.method === 'HEAD') return;
    // the 1 MiB limit answers before the session is loaded
    const cookie = c.get('session') ? undefined : getCookie(c, SESSION_COOKIE);
    const s = c.get('session') ?? (cookie ? sessionOf(ctx, cookie) : undefined);
    if (!s) return;
    const { org_id, actor } = s;
    const page = c.req.path.slice(prefix.length) || '/';
    keepRefused(ctx, () => ({
      org_id,
      actor,
      action: `dashboard.${c.req.method.toLowerCase()}`,
      resource_type: 'dashboard_page',
      resource_id: page,
      status: 413,
    }));
  };

/**
 * Every page but sign-in: signed in (else to sign-in, with `next`), as this org (else 404), CSRF on
 * POST (else 403). Counts the org's steps awaiting approval for the navigation.
 */
const requireOrgSession =
  (ctx: AppContext): MiddlewareHandler<DashEnv> =>
  async (c, next) => {
    const s = c.get('session');
    const org = c.req.param('org');
    if (!s) {
      const url = new URL(c.req.url);
      const back = c.req.method === 'GET' ? url.pathname + url.search : undefined;
      return c.redirect(c.get('paths').login(back), c.req.method === 'GET' ? 302 : 303);
    }
    if (org !== s.org_id) return notFoundPage(c);
    c.set('paths', pathsFor(c.get('prefix'), s.org_id));
    if (c.req.method !== 'GET' && c.req.method !== 'HEAD') {
      if (!sameToken(await formCsrf(c), s.csrf))
        return errorPage(c, 403, 'Forbidden', 'Missing or invalid CSRF token. Reload the page and try again.');
    }
    c.set('pendingApprovals', countPendingApprovals(ctx, s.org_id));
    await next();
  };

export function createDashboardApp(ctx: AppContext, prefix: string): Hono<DashEnv> {
  const secure = new URL(ctx.urls.dashboard).protocol === 'https:';
  const r = new Hono<DashEnv>().basePath(prefix || '/');
  r.use('*', async (c, next) => {
    c.set('prefix', prefix);
    c.set('secure', secure);
    await next();
    for (const [k, v] of Object.entries(SECURITY_HEADERS)) c.header(k, v);
    if (!c.res.headers.has('cache-control')) c.header('cache-control', 'no-store');
  });
  r.use('*', keepTooLarge(ctx, prefix));
  r.use('*', bodyLimit({ maxSize: MAX_FORM_BYTES, onError: (c) => c.text('request body is over 1 MiB', 413, { connection: 'close' }) }));
  r.use('*', loadSession(ctx));
  r.use('*', async (c, next) => {
    c.set('paths', pathsFor(prefix, c.get('session')?.org_id ?? ''));
    await next();
  });
  r.use('*', takeFlash);
  r.onError((err, c) => {
    if (err instanceof NotFoundError) return notFoundPage(c);
    if (err instanceof ForbiddenError) return errorPage(c, 403, 'Not allowed', err.message);
    if (err instanceof ApprovalRefusedError) return errorPage(c, 403, 'Not an approver of this step', err.message);
    if (err instanceof InvalidError || err instanceof ConflictError)
      return errorPage(c, err instanceof InvalidError ? 400 : 409, 'Request refused', err.message);
    ctx.logger.error({ err: err instanceof Error ? err.message : String(err), path: c.req.path }, 'dashboard request failed');
    return errorPage(c, 500, 'Something went wrong', 'The request failed. Try again; if it keeps failing, check the service logs.');
  });
  r.notFound((c) => notFoundPage(c));

  r.get('/style.css', (c) =>
    c.body(STYLESHEET, 200, { 'content-type': 'text/css; charset=utf-8', 'cache-control': 'public, max-age=3600' }),
  );
  r.get('/app.js', (c) =>
    c.body(SCRIPT, 200, { 'content-type': 'text/javascript; charset=utf-8', 'cache-control': 'public, max-age=3600' }),
  );
  r.get('/', (c) => {
    const s = c.get('session');
    return c.redirect(s ? pathsFor(prefix, s.org_id).org : c.get('paths').login(), 302);
  });
  registerLogin(r, ctx);
  // a one-time approval link's page: no sign-in (before the org guard, which would take it for an org)
  registerApprovalLinks(r, ctx);

  const guard = requireOrgSession(ctx);
  r.use('/:org', guard);
  r.use('/:org/*', guard);
  registerOverview(r, ctx);
  registerInstalls(r, ctx);
  registerWorkflows(r, ctx);
  registerApps(r, ctx);
  registerApprovals(r, ctx);
  registerWebhooks(r, ctx);
  registerWatchdog(r, ctx);
  registerHistory(r, ctx);
  registerEventTypes(r, ctx);
  registerAudit(r, ctx);
  registerIngestRejections(r, ctx);
  registerSettings(r, ctx);
  return r;
}

/**
 * Serve the dashboard from `app` under the path of `ctx.urls.dashboard` (read at request time), and
 * send `/` there: a 302 to the path the dashboard is served under on this server (even when the
 * dashboard URL names another host, as behind a proxy). With the dashboard at the root, `/` is its own.
 */
export function mountDashboard(app: Hono, ctx: AppContext): void {
  let built: { prefix: string; app: Hono<DashEnv> } | undefined;
  app.use('*', async (c, next) => {
    if (!ctx.urls.dashboard) return next();
    const prefix = prefixOf(ctx.urls.dashboard);
    const path = c.req.path;
    if (prefix && path !== prefix && !path.startsWith(`${prefix}/`)) return next();
    if (!built || built.prefix !== prefix) built = { prefix, app: createDashboardApp(ctx, prefix) };
    return built.app.fetch(c.req.raw, c.env);
  });
  app.get('/', (c, next) => (ctx.urls.dashboard ? c.redirect(prefixOf(ctx.urls.dashboard) || '/', 302) : next()));
}
