// Sign-in (CONTRACT 7, 6.7, 8): org id + API token, a CSRF token signed for this browser's cookie
// and good for one attempt (src/dashboard/session.ts LoginCsrf), a form posted from the dashboard's
// own origin, a short back-off after repeated failures from one client address for one org; then a
// session cookie. Whatever is posted, what is kept is bounded: a body over 8 KiB is refused before
// it is read (413), an org id that is not a well-formed id is 400 before the back-off sees it.
import { isIP } from 'node:net';
import type { Hono } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { getCookie } from 'hono/cookie';
import { getConnInfo } from '@hono/node-server/conninfo';
import type { AppContext } from '../../context.ts';
import { ID_RE } from '../../domain/ids.ts';
import { randomToken, signIn, signOut } from '../../services/sessions.ts';
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
import { Csrf, LabeledInput } from '../ui.tsx';

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
      <LabeledInput
        id="org_id"
        label="Org ID"
        type="text"
        name="org_id"
        value={p.orgId ?? ''}
        required
        autocomplete="username"
        autocapitalize="none"
        spellcheck={false}
      />
      <LabeledInput id="api_token" label="API token" type="password" name="api_token" required autocomplete="current-password">
        <p class="hint">
          Create one with <code>svc tokens create</code> or on the org settings page.
        </p>
      </LabeledInput>
      <div>
        <button type="submit">Sign in</button>
      </div>
    </form>
  </>
);

const field = (v: unknown) => (typeof v === 'string' ? v : '');

/** A sign-in form is a few hundred bytes; anything over this is refused unread (CONTRACT 8). */
export const SIGN_IN_MAX_BODY = 8 * 1024;

/**
 * The client's address, for the back-off: the connection's peer, or with --trust-proxy the last
 * address of X-Forwarded-For (the one the proxy in front of svc adds; what the client itself wrote
 * comes before it). Without --trust-proxy the header is ignored: a client cannot choose its address.
 */
/** How much of a refused sign-in body is read and dropped before the 413 (a larger one: cut off). */
const DISCARD_MAX = 4 * 1024 * 1024;

async function discard(body: ReadableStream<Uint8Array> | null, max: number): Promise<void> {
  if (!body) return;
  const reader = body.getReader();
  try {
    for (let n = 0; n <= max; ) {
      const { done, value } = await reader.read();
      if (done) return;
      n += value.byteLength;
    }
  } catch {
    // the client went away
  } finally {
    void reader.cancel().catch(() => {});
  }
}

export function clientAddress(c: DashContext, trustProxy: boolean): string {
  if (trustProxy) {
    const last = c.req.header('x-forwarded-for')?.split(',').pop()?.trim() ?? '';
    if (last.length <= 64 && isIP(last)) return unmapped(last);
  }
  try {
    return unmapped(getConnInfo(c).remote.address ?? 'unknown');
  } catch {
    return 'unknown';
  }
}

const unmapped = (address: string) => (address.startsWith('::ffff:') && isIP(address.slice(7)) === 4 ? address.slice(7) : address);

/** A form posted from another site (its Origin says so; browsers send it with every form POST). */
function crossOrigin(c: DashContext, dashboardUrl: string): boolean {
  const origin = c.req.header('origin');
  if (origin === undefined) return false;
  return origin !== new URL(c.req.url).origin && origin !== new URL(dashboardUrl).origin;
}

export function registerLogin(r: Hono<DashEnv>, ctx: AppContext) {
  const csrfTokens = LoginCsrf.forContext(ctx);
  const throttle = new SignInThrottle(ctx.clock);

  function showLogin(c: DashContext, props: Omit<LoginProps, 'action' | 'csrf'>, status: 200 | 400 | 401 | 429 = 200) {
    // one cookie per browser (not per page view), so two sign-in tabs do not invalidate each other;
    // each form gets its own token, signed for that cookie
    const cookie = loginCsrfCookie(c) ?? randomToken();
    const csrf = csrfTokens.token(cookie, ctx.clock.now());
    if (csrf === undefined) {
      // MAX_FORMS_PER_SECOND served in this second already (session.ts LoginCsrf): the next second
      c.header('retry-after', '1');
      return errorPage(c, 503, 'Busy', 'Too many sign-in forms are being served right now. Reload the page in a second.');
    }
    setLoginCsrfCookie(c, cookie);
    const s = c.get('session');
    const action = c.get('paths').login();
    return render(c, { title: 'Sign in', children: <LoginForm {...props} action={action} csrf={csrf} signedInAs={s?.org_id} /> }, status);
  }

  r.get('/login', (c) => showLogin(c, { next: safeNext(c.req.query('next'), c.get('prefix')) }));

  const tooLarge = bodyLimit({
    maxSize: SIGN_IN_MAX_BODY,
    // the body is read and dropped (nothing of it kept) up to DISCARD_MAX before the 413, so that a
    // client still writing it reads the answer instead of a broken pipe; then the connection closes
    onError: async (c) => {
      await discard(c.req.raw.body, DISCARD_MAX);
      c.header('connection', 'close');
      return errorPage(c as DashContext, 413, 'Request too large', `A sign-in is at most ${SIGN_IN_MAX_BODY} bytes.`);
    },
  });

  r.post('/login', tooLarge, async (c) => {
    const body = await c.req.parseBody();
    // the form's token is used up by this attempt, whatever comes of it
    if (crossOrigin(c, ctx.urls.dashboard) || !csrfTokens.consume(loginCsrfCookie(c), await formCsrf(c), ctx.clock.now())) {
      return errorPage(
        c,
        403,
        'Forbidden',
        'The sign-in form expired, was used already or did not come from this site. Reload the sign-in page and try again.',
      );
    }
    const orgId = field(body.org_id).trim();
    const token = field(body.api_token).trim();
    const next = safeNext(field(body.next), c.get('prefix'));
    if (!ID_RE.test(orgId)) {
      // nothing is kept for it (the back-off follows well-formed ids only); not echoed back either
      return showLogin(c, { next, error: 'An org ID is lowercase letters, digits and _, at most 64 characters.' }, 400);
    }
    const address = clientAddress(c, ctx.config.trustProxy ?? false);
    const wait = throttle.blockedFor(address, orgId);
    if (wait > 0) {
      c.header('retry-after', String(Math.ceil(wait / 1000)));
      return showLogin(c, { next, orgId, error: 'Too many failed sign-ins for this org. Wait a minute and try again.' }, 429);
    }
    const signedIn = signIn(ctx, orgId, token, SESSION_TTL_MS, getCookie(c, SESSION_COOKIE));
    if (!signedIn) {
      throttle.failed(address, orgId);
      return showLogin(c, { next, orgId, error: 'Unknown org ID or API token.' }, 401);
    }
    throttle.succeeded(address, orgId);
    setSessionCookie(c, signedIn.cookie);
    clearLoginCsrfCookie(c);
    return c.redirect(next ?? pathsFor(c.get('prefix'), orgId).org, 303);
  });

  r.post('/logout', async (c) => {
    const s = c.get('session');
    if (s) {
      if (!sameToken(await formCsrf(c), s.csrf)) return errorPage(c, 403, 'Forbidden', 'Missing or invalid CSRF token.');
      signOut(ctx, s.token);
    }
    clearCookie(c, SESSION_COOKIE);
    return c.redirect(c.get('paths').login(), 303);
  });
}
