// Dashboard sign-in state: the session cookie, CSRF checks and one-shot flash messages.
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Context, MiddlewareHandler } from 'hono';
import { deleteCookie, getCookie, setCookie } from 'hono/cookie';
import type { AppContext } from '../context.ts';
import { loginFormKey, sessionOf, type SignedIn } from '../services/sessions.ts';
import type { Paths } from './paths.ts';

export const SESSION_COOKIE = 'svc_session';
/**
 * The login form's CSRF cookie (there is no session yet to hold a token): a random value per
 * browser; each form carries a token signed with the server's key over it (LoginCsrf). Over https
 * it is a `__Host-` cookie, which a sibling subdomain cannot set (cookie tossing).
 */
export const LOGIN_CSRF_COOKIE = 'svc_login_csrf';
/** A login form's token is accepted this long after the form was served. */
export const LOGIN_FORM_TTL_MS = 60 * 60 * 1000;
const FLASH_COOKIE = 'svc_flash';
export const SESSION_TTL_MS = 12 * 60 * 60 * 1000;

export interface Flash {
  kind: 'ok' | 'error';
  text: string;
  /** label/value pairs shown under the text (a test event's result) */
  details?: Array<[string, string]>;
}

export type DashEnv = {
  Variables: {
    prefix: string;
    secure: boolean;
    session: (SignedIn & { token: string }) | undefined;
    paths: Paths;
    flash: Flash | undefined;
    /** steps awaiting approval in the signed-in org (the navigation's count); set on org pages */
    pendingApprovals: number | undefined;
  };
};
export type DashContext = Context<DashEnv>;

function cookieOpts(c: DashContext, maxAgeSeconds?: number) {
  return {
    path: c.get('prefix') || '/',
    httpOnly: true,
    sameSite: 'Lax' as const,
    secure: c.get('secure'),
    ...(maxAgeSeconds !== undefined ? { maxAge: maxAgeSeconds } : {}),
  };
}

export function setSessionCookie(c: DashContext, token: string): void {
  setCookie(c, SESSION_COOKIE, token, cookieOpts(c, Math.floor(SESSION_TTL_MS / 1000)));
}

// over https a `__Host-` cookie (Secure, for the path /, no domain)
const loginCsrfCookieOpts = (c: DashContext, maxAgeSeconds?: number) => ({ ...cookieOpts(c, maxAgeSeconds), ...(c.get('secure') ? { path: '/', prefix: 'host' as const } : {}) });

/** This browser's login CSRF value (from its cookie), if it has a well-formed one. */
export function loginCsrfCookie(c: DashContext): string | undefined {
  const v = c.get('secure') ? getCookie(c, LOGIN_CSRF_COOKIE, 'host') : getCookie(c, LOGIN_CSRF_COOKIE);
  return v && /^[A-Za-z0-9_-]{43}$/.test(v) ? v : undefined;
}

export function setLoginCsrfCookie(c: DashContext, value: string): void {
  setCookie(c, LOGIN_CSRF_COOKIE, value, loginCsrfCookieOpts(c, Math.floor(LOGIN_FORM_TTL_MS / 1000)));
}

export function clearLoginCsrfCookie(c: DashContext): void {
  deleteCookie(c, LOGIN_CSRF_COOKIE, loginCsrfCookieOpts(c));
}

/**
 * Login form tokens: `<issued at ms>.<nonce>.<HMAC(server key, "login", cookie value, issued at, nonce)>`.
 * A token is good only with the cookie it was made for, for LOGIN_FORM_TTL_MS, for the login form
 * only (a session's CSRF token is another thing), and for ONE sign-in attempt, failed or not
 * (CONTRACT 8): `consume` remembers the nonces it took until they expire. Nobody without the
 * server's key can make one for a cookie value of their choosing.
 *
 * The memory of used nonces is bounded (MAX_USED): past it, the ones issued earliest are forgotten
 * and every token issued at or before them is refused from then on (`floor`), so a forgotten
 * nonce can never be used again. Tokens issued before this process started are refused too (what
 * an earlier process took is not known here): a form left open across a restart is reloaded.
 */
export class LoginCsrf {
  /** nonce → issued at (ms), of tokens already used and not yet expired */
  private readonly used = new Map<string, number>();
  /** tokens issued before this (ms) are refused */
  private floor: number;

  constructor(
    private readonly key: Buffer,
    startedAt: number,
  ) {
    this.floor = startedAt;
  }

  /** The server's key, made once per database. */
  static forContext(ctx: AppContext): LoginCsrf {
    return new LoginCsrf(loginFormKey(ctx), ctx.clock.now());
  }

  private mac(cookie: string, at: string, nonce: string): string {
    return createHmac('sha256', this.key).update('login\n').update(cookie).update('\n').update(at).update('\n').update(nonce).digest('base64url');
  }

  token(cookie: string, nowMs: number): string {
    const at = String(Math.floor(nowMs));
    const nonce = randomBytes(12).toString('base64url');
    return `${at}.${nonce}.${this.mac(cookie, at, nonce)}`;
  }

  /** Whether a token is good for this cookie now; a good one is used up (the next try with it is refused). */
  consume(cookie: string | undefined, token: string | undefined, nowMs: number): boolean {
    if (!cookie || !token || token.length > 120) return false;
    const m = /^(\d{1,16})\.([A-Za-z0-9_-]{16})\.([A-Za-z0-9_-]{43})$/.exec(token);
    if (!m) return false;
    const [, at, nonce, mac] = m;
    const issued = Number(at);
    const age = nowMs - issued;
    if (age > LOGIN_FORM_TTL_MS || age < -60_000 || issued < this.floor) return false;
    if (!sameToken(mac, this.mac(cookie, at, nonce))) return false;
    if (this.used.has(nonce)) return false;
    this.used.set(nonce, issued);
    if (this.used.size > MAX_USED) this.forget(nowMs);
    return true;
  }

  /** Drop expired nonces; if still too many, the earliest issued tenth, raising the floor past them. */
  private forget(nowMs: number): void {
    const expiredBefore = nowMs - LOGIN_FORM_TTL_MS;
    for (const [nonce, at] of this.used) if (at < expiredBefore) this.used.delete(nonce);
    if (this.used.size <= MAX_USED) return;
    const byIssue = [...this.used].sort((a, b) => a[1] - b[1]);
    const drop = byIssue.slice(0, Math.ceil(MAX_USED / 10));
    for (const [nonce] of drop) this.used.delete(nonce);
    this.floor = Math.max(this.floor, drop[drop.length - 1][1] + 1);
  }
}

/** Used login tokens remembered at most (about 60 bytes each). */
const MAX_USED = 10_000;

export function clearCookie(c: DashContext, name: string): void {
  deleteCookie(c, name, cookieOpts(c));
}

/** Reads the session cookie (if any) into `session`. */
export function loadSession(ctx: AppContext): MiddlewareHandler<DashEnv> {
  return async (c, next) => {
    const token = getCookie(c, SESSION_COOKIE);
    const s = token ? sessionOf(ctx, token) : undefined;
    c.set('session', s && token ? { ...s, token } : undefined);
    await next();
  };
}

/** Equal strings, compared in constant time. */
export function sameToken(a: string | undefined, b: string | undefined): boolean {
  if (!a || !b) return false;
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** The `csrf` field of a submitted form. */
export async function formCsrf(c: DashContext): Promise<string | undefined> {
  const body = await c.req.parseBody({ all: true });
  const v = body.csrf;
  return typeof v === 'string' ? v : undefined;
}

/** Sets a message shown once, by the next page rendered. */
export function flash(c: DashContext, f: Flash): void {
  const details = f.details?.slice(0, 10).map(([k, v]) => [k.slice(0, 100), v.slice(0, 500)]);
  const value = Buffer.from(JSON.stringify({ kind: f.kind, text: f.text.slice(0, 500), ...(details ? { details } : {}) })).toString('base64url');
  setCookie(c, FLASH_COOKIE, value, cookieOpts(c, 60));
}

/** The result of one attempt sent from the dashboard (a test event, a resend). */
export interface SentAttempt {
  delivered: boolean;
  status?: number;
  error?: string;
  duration_ms: number;
}

/**
 * Flashes how an attempt sent from the dashboard went: `ok(http)` or `failed(why)` the sentence,
 * then its details (`first` ones, then delivered, HTTP status, error, duration).
 */
export function flashAttempt(c: DashContext, res: SentAttempt, text: { ok: (http: string) => string; failed: (why: string) => string }, first: Array<[string, string]> = []): void {
  const http = res.status !== undefined ? `HTTP ${res.status}` : 'no response';
  const details: Array<[string, string]> = [
    ...first,
    ['Delivered', res.delivered ? 'yes' : 'no'],
    ['HTTP status', res.status !== undefined ? String(res.status) : 'no response'],
    ['Error', res.error ?? '—'],
    ['Duration', `${res.duration_ms} ms`],
  ];
  flash(c, res.delivered ? { kind: 'ok', text: text.ok(http), details } : { kind: 'error', text: text.failed(res.error ?? http), details });
}

/** Takes the pending flash message (if any) into `flash`. */
export const takeFlash: MiddlewareHandler<DashEnv> = async (c, next) => {
  const raw = getCookie(c, FLASH_COOKIE);
  let f: Flash | undefined;
  if (raw) {
    try {
      const v = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8')) as Flash;
      if ((v.kind === 'ok' || v.kind === 'error') && typeof v.text === 'string') {
        const details = Array.isArray(v.details) && v.details.every((d) => Array.isArray(d) && d.length === 2 && d.every((x) => typeof x === 'string')) ? v.details : undefined;
        f = { kind: v.kind, text: v.text, ...(details ? { details } : {}) };
      }
    } catch {
      f = undefined;
    }
    if (c.req.method === 'GET') clearCookie(c, FLASH_COOKIE);
  }
  c.set('flash', c.req.method === 'GET' ? f : undefined);
  await next();
};
