// Dashboard sessions (CONTRACT 7): signing in with an org id and an API token, the session a cookie
// stands for, signing out, and the server's key for the login form's tokens. The dashboard reaches
// the store only through here.
import type { AppContext } from '../context.ts';
import { lookupToken } from '../../store/orgs.ts';
import { createSession, deleteSession, getSession, randomToken, type Session } from '../../store/sessions.ts';
import { setSettingOnce } from '../../store/settings.ts';

export type { Session };
export { randomToken };

/** The live session of a session cookie's value, or undefined (unknown or expired). */
export function sessionOf(ctx: AppContext, cookie: string): Session | undefined {
  return getSession(ctx.db, cookie);
}

/**
 * Sign in as `orgId` with an API token of that org: a new session (replacing the one `previous`
 * stands for, if any), its cookie value; undefined when the token is unknown, revoked or another org's.
 */
export function signIn(ctx: AppContext, orgId: string, apiToken: string, ttlMs: number, previous?: string): { cookie: string } | undefined {
  const known = apiToken ? lookupToken(ctx.db, apiToken) : undefined;
  if (!known || known.org_id !== orgId) return undefined;
  if (previous) deleteSession(ctx.db, previous);
  const { token } = createSession(ctx.db, orgId, ttlMs, new Date(), known.token_id);
  return { cookie: token };
}

export function signOut(ctx: AppContext, cookie: string): void {
  deleteSession(ctx.db, cookie);
}

/** The server's key for the login form's tokens, made once per database. */
export function loginFormKey(ctx: AppContext): Buffer {
  return Buffer.from(setSettingOnce(ctx.db, 'dashboard_csrf_key', randomToken()), 'base64url');
}
