// Sign-in (CONTRACT 7, 6.7): org id + API token, a CSRF token signed for this browser's cookie
// (src/dashboard/session.ts LoginCsrf), a form posted from the dashboard's own origin, a short
// back-off after repeated failures for an org; then a session cookie.
import type { Hono } from 'hono';
import { getCookie } from 'hono/cookie';
import type { AppContext } from '../../context.ts';
import { lookupToken } from '../../../store/orgs.ts';
import { createSession, deleteSession, randomToken } from '../../../store/sessions.ts';
import { pathsFor, safeNext } from '../paths.ts';
import { errorPage, render } from '../render.tsx';
import {
  clearCookie,
  clearLoginCsrfCookie,
  formCsrf,
  loginCsrfCookie,
  LoginCsrf,
  sameToken,
  SESSION_COOKIE,
  SESSION_TTL_MS,
  setLoginCsrfCookie,
  setSessionCookie,
  type DashContext,
  type DashEnv,
} from '../session.ts';
import { SignInThrottle } from '../sign-in-throttle.ts';
import { Csrf } from '../ui.tsx';

interface LoginProps {
  action: string;
  csrf: string;
  next?: string;
  orgId?: string;
  error?: string;
  signedInAs?: string;
}

const LoginForm = (p: LoginProps) => (
  <>
    <h1>Sign in</h1>
    {p.signedInAs ? <p class="muted">You are signed in as {p.signedInAs}. Signing in again replaces that session.</p> : null}
    {p.error ? (
      <p class="flash error" role="alert">
        {p.error}
      </p>
    ) : null}
    <form method="post" action={p.action} class="stack card">
      <Csrf token={p.csrf} />
      {p.next ? <input type="hidden" name="next" value={p.next} /> : null}
      <div>
        <label for="org_id">Org ID</label>
        <input type="text" id="org_id" name="org_id" value={p.orgId ?? ''} required autocomplete="username" autocapitalize="none" spellcheck={false} />
      </div>
      <div>
        <label for="api_token">API token</label>
        <input type="password" id="api_token" name="api_token" required autocomplete="current-password" />
        <p class="hint">Create one with <code>svc tokens create</code> or on the org settings page.</p>
      </div>
      <div>
        <button type="submit">Sign in</button>
      </div>
    </form>
  </>
);

const field = (v: unknown) => (typeof v === 'string' ? v : '');

/** A form posted from another site (its Origin says so; browsers send it with every form POST). */
function crossOrigin(c: DashContext, dashboardUrl: string): boolean {
  const origin = c.req.header('origin');
  if (origin === undefined) return false;
  return origin !== new URL(c.req.url).origin && origin !== new URL(dashboardUrl).origin;
}

export function registerLogin(r: Hono<DashEnv>, ctx: AppContext) {
  const csrfTokens = LoginCsrf.forDb(ctx.db);
  const throttle = new SignInThrottle(ctx.clock);

  function showLogin(c: DashContext, props: Omit<LoginProps, 'action' | 'csrf'>, status: 200 | 400 | 401 | 429 = 200) {
    // one cookie per browser (not per page view), so two sign-in tabs do not invalidate each other;
    // each form gets its own token, signed for that cookie
    const cookie = loginCsrfCookie(c) ?? randomToken();
    setLoginCsrfCookie(c, cookie);
    const s = c.get('session');
    const action = c.get('paths').login();
    return render(c, { title: 'Sign in', children: <LoginForm {...props} action={action} csrf={csrfTokens.token(cookie, ctx.clock.now())} signedInAs={s?.org_id} /> }, status);
  }

  r.get('/login', (c) => showLogin(c, { next: safeNext(c.req.query('next'), c.get('prefix')) }));

  r.post('/login', async (c) => {
    const body = await c.req.parseBody();
    if (crossOrigin(c, ctx.urls.dashboard) || !csrfTokens.verify(loginCsrfCookie(c), await formCsrf(c), ctx.clock.now())) {
      return errorPage(c, 403, 'Forbidden', 'The sign-in form expired or did not come from this site. Reload the sign-in page and try again.');
    }
    const orgId = field(body.org_id).trim();
    const token = field(body.api_token).trim();
    const next = safeNext(field(body.next), c.get('prefix'));
    const wait = orgId ? throttle.blockedFor(orgId) : 0;
    if (wait > 0) {
      c.header('retry-after', String(Math.ceil(wait / 1000)));
      return showLogin(c, { next, orgId, error: 'Too many failed sign-ins for this org. Wait a minute and try again.' }, 429);
    }
    const known = token ? lookupToken(ctx.db, token) : undefined;
    if (!orgId || !known || known.org_id !== orgId) {
      if (orgId) throttle.failed(orgId);
      return showLogin(c, { next, orgId, error: 'Unknown org ID or API token.' }, 401);
    }
    throttle.succeeded(orgId);
    const old = getCookie(c, SESSION_COOKIE);
    if (old) deleteSession(ctx.db, old);
    const { token: sessionToken } = createSession(ctx.db, orgId, SESSION_TTL_MS, new Date(), known.token_id);
    setSessionCookie(c, sessionToken);
    clearLoginCsrfCookie(c);
    return c.redirect(next ?? pathsFor(c.get('prefix'), orgId).org, 303);
  });

  r.post('/logout', async (c) => {
    const s = c.get('session');
    if (s) {
      if (!sameToken(await formCsrf(c), s.csrf)) return errorPage(c, 403, 'Forbidden', 'Missing or invalid CSRF token.');
      deleteSession(ctx.db, s.token);
    }
    clearCookie(c, SESSION_COOKIE);
    return c.redirect(c.get('paths').login(), 303);
  });
}
