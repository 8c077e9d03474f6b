// Dashboard sign-in state: the session cookie, CSRF checks and one-shot flash messages.
import { createHmac, timingSafeEqual } from 'node:crypto';
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
const loginCsrfCookieOpts = (c: DashContext, maxAgeSeconds?: number) => ({
  ...cookieOpts(c, maxAgeSeconds),
  ...(c.get('secure') ? { path: '/', prefix: 'host' as const } : {}),
});

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
 * Login form tokens: `<issued at ms>.<serial>.<HMAC(server key, "login", cookie value, issued at, serial)>`.
 * A token is good only with the cookie it was made for, for LOGIN_FORM_TTL_MS, for the login form
 * only (a session's CSRF token is another thing), and for ONE sign-in attempt, failed or not
 * (CONTRACT 8). Nobody without the server's key can make one for a cookie value of their choosing.
 *
 * The signature and the expiry are checked without any table. The one-attempt rule needs a memory,
 * and that memory cannot be filled by others (CONTRACT 8, new in 0.3: a form opened an hour ago
 * still signs in, whatever anyone else posts meanwhile). The earlier design remembered the nonces of
 * used tokens, 10,000 at most, and past that refused every token issued before the ones it forgot:
 * one client posting 1,000 sign-ins a second failed every form older than about 9 s, for everyone.
 *
 * Now the memory is indexed by what the server issued, not by what is posted. Each token carries
 * its serial within the second it was issued in; per second of issue svc keeps how many tokens it
 * issued and one bit per token, set when the token is used. A post can only set the bit of its own
 * token, which was there from the moment the form was served: nothing anyone posts moves, evicts or
 * outgrows another form's bit, so a valid unused token is good until it expires, whatever the flood.
 * A second's bits are dropped once all its tokens have expired. The memory is bounded by what is
 * issued: at most MAX_FORMS_PER_SECOND forms a second (one bit each, so at most about 4.6 MB for a
 * whole hour at that rate); past it, the form is not served in that second (`token` answers
 * undefined, the page 503 with Retry-After: 1). That bound refuses a new form in a second when svc is
 * already serving that many, never an old one. (Partitioning a nonce table per client address was
 * the other choice: it still needs a bound on how many addresses are followed, and a client with many
 * addresses, or a token used from another address, would defeat it.)
 *
 * Tokens issued before this process started are refused (what an earlier process took is not known
 * here): a form left open across a restart is reloaded.
 */
export class LoginCsrf {
  /** per second of issue (ms / 1000): the tokens issued in it and which of them were used */
  private readonly seconds = new Map<number, IssuedSecond>();

  constructor(
    private readonly key: Buffer,
    /** tokens issued before this (ms) are refused */
    private readonly startedAt: number,
  ) {}

  /** The server's key, made once per database. */
  static forContext(ctx: AppContext): LoginCsrf {
    return new LoginCsrf(loginFormKey(ctx), ctx.clock.now());
  }

  private mac(cookie: string, at: string, serial: string): string {
    return createHmac('sha256', this.key)
      .update('login\n')
      .update(cookie)
      .update('\n')
      .update(at)
      .update('\n')
      .update(serial)
      .digest('base64url');
  }

  /** A new form's token for this cookie, or undefined when MAX_FORMS_PER_SECOND were served in this second already. */
  token(cookie: string, nowMs: number): string | undefined {
    const ms = Math.floor(nowMs);
    const second = Math.floor(ms / 1000);
    let s = this.seconds.get(second);
    if (!s) {
      this.forget(ms);
      this.seconds.set(second, (s = { issued: 0, used: new Uint8Array(16) }));
    }
    if (s.issued >= MAX_FORMS_PER_SECOND) return undefined;
    const serial = s.issued++;
    if (serial >> 3 >= s.used.length) {
      const grown = new Uint8Array(Math.min(s.used.length * 2, (MAX_FORMS_PER_SECOND >> 3) + 1));
      grown.set(s.used);
      s.used = grown;
    }
    const at = String(ms);
    return `${at}.${serial}.${this.mac(cookie, at, String(serial))}`;
  }

  /** Whether a token is good for this cookie now; a good one is used up (the next try with it is refused). */
  consume(cookie: string | undefined, token: string | undefined, nowMs: number): boolean {
    if (!cookie || !token || token.length > 120) return false;
    const m = /^(\d{1,16})\.(0|[1-9]\d{0,5})\.([A-Za-z0-9_-]{43})$/.exec(token);
    if (!m) return false;
    const [, at, serialText, mac] = m;
    const issued = Number(at);
    const age = nowMs - issued;
    if (age > LOGIN_FORM_TTL_MS || age < -60_000 || issued < this.startedAt) return false;
    if (!sameToken(mac, this.mac(cookie, at, serialText))) return false;
    const s = this.seconds.get(Math.floor(issued / 1000));
    const serial = Number(serialText);
    if (!s || serial >= s.issued) return false;
    const bit = 1 << (serial & 7);
    if (s.used[serial >> 3] & bit) return false;
    s.used[serial >> 3] |= bit;
    return true;
  }

  /** Drop the seconds whose every token has expired (the clock may have moved either way: all are looked at). */
  private forget(nowMs: number): void {
    const before = Math.floor((nowMs - LOGIN_FORM_TTL_MS) / 1000) - 1;
    for (const second of this.seconds.keys()) if (second < before) this.seconds.delete(second);
  }

  /** Seconds of issue remembered, and the bytes of their bits (for tests of the bound). */
  get memory(): { seconds: number; bytes: number } {
    let bytes = 0;
    for (const s of this.seconds.values()) bytes += s.used.length;
    return { seconds: this.seconds.size, bytes };
  }
}

interface IssuedSecond {
  /** tokens issued in this second: their serials are 0 … issued - 1 */
  issued: number;
  /** bit `serial` is set once that token was used */
  used: Uint8Array;
}

/**
 * Login forms served in one second at most (the bits of an hour of them: about 4.6 MB). svc serves
 * far fewer: past this it is saturated anyway; a new form waits for the next second.
 */
export const MAX_FORMS_PER_SECOND = 10_000;

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
  const value = Buffer.from(JSON.stringify({ kind: f.kind, text: f.text.slice(0, 500), ...(details ? { details } : {}) })).toString(
    'base64url',
  );
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
export function flashAttempt(
  c: DashContext,
  res: SentAttempt,
  text: { ok: (http: string) => string; failed: (why: string) => string },
  first: Array<[string, string]> = [],
): void {
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
        const details =
          Array.isArray(v.details) && v.details.every((d) => Array.isArray(d) && d.length === 2 && d.every((x) => typeof x === 'string'))
            ? v.details
            : undefined;
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
