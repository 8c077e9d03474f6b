// Dashboard sign-in state: the session cookie, CSRF checks and one-shot flash messages.
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { Context, MiddlewareHandler } from 'hono';
import { deleteCookie, getCookie, setCookie } from 'hono/cookie';
import type { AppContext } from '../context.ts';
import { getSession, randomToken, type Session } from '../../store/sessions.ts';
import { setSettingOnce } from '../../store/settings.ts';
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
    session: (Session & { token: string }) | undefined;
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
 * Login form tokens: `<issued at ms>.<HMAC(server key, "login", cookie value, issued at)>`. A token
 * is good only with the cookie it was made for, for LOGIN_FORM_TTL_MS, and for the login form only
 * (a session's CSRF token is another thing). Nobody without the server's key can make one for a
 * cookie value of their choosing.
 */
export class LoginCsrf {
  constructor(private readonly key: Buffer) {}

  /** The server's key, made once per database. */
  static forDb(db: Parameters<typeof setSettingOnce>[0]): LoginCsrf {
    return new LoginCsrf(Buffer.from(setSettingOnce(db, 'dashboard_csrf_key', randomToken()), 'base64url'));
  }

  private mac(cookie: string, at: string): string {
    return createHmac('sha256', this.key).update('login\n').update(cookie).update('\n').update(at).digest('base64url');
  }

  token(cookie: string, nowMs: number): string {
    const at = String(Math.floor(nowMs));
    return `${at}.${this.mac(cookie, at)}`;
  }

  verify(cookie: string | undefined, token: string | undefined, nowMs: number): boolean {
    if (!cookie || !token) return false;
    const dot = token.indexOf('.');
    const at = token.slice(0, dot);
    if (dot < 1 || !/^\d{1,16}$/.test(at)) return false;
    const age = nowMs - Number(at);
    if (age > LOGIN_FORM_TTL_MS || age < -60_000) return false;
    return sameToken(token.slice(dot + 1), this.mac(cookie, at));
  }
}

export function clearCookie(c: DashContext, name: string): void {
  deleteCookie(c, name, cookieOpts(c));
}

/** Reads the session cookie (if any) into `session`. */
export function loadSession(ctx: AppContext): MiddlewareHandler<DashEnv> {
  return async (c, next) => {
    const token = getCookie(c, SESSION_COOKIE);
    const s = token ? getSession(ctx.db, token) : undefined;
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
