// Dashboard sign-in state: the session cookie, CSRF checks and one-shot flash messages.
import { timingSafeEqual } from 'node:crypto';
import type { Context, MiddlewareHandler } from 'hono';
import { deleteCookie, getCookie, setCookie } from 'hono/cookie';
import type { AppContext } from '../context.ts';
import { getSession, type Session } from '../../store/sessions.ts';
import type { Paths } from './paths.ts';

export const SESSION_COOKIE = 'svc_session';
/** Double-submit token of the login form (there is no session yet to hold it). */
export const LOGIN_CSRF_COOKIE = 'svc_login_csrf';
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

export function setLoginCsrfCookie(c: DashContext, token: string): void {
  setCookie(c, LOGIN_CSRF_COOKIE, token, cookieOpts(c, 60 * 60));
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
