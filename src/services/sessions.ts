// Dashboard sessions (CONTRACT 7): signing in with an org id and an API token, the session a cookie
// stands for, signing out, and the server's key for the login form's tokens. The dashboard reaches
// the store only through here.
import type { AppContext } from '../context.ts';
import { liveTokenById, lookupToken } from '../../store/orgs.ts';
import { DEFAULT_SCOPE, type Actor, type Scope } from '../domain/scopes.ts';
import { createSession, deleteSession, getSession, randomToken, type Session } from '../../store/sessions.ts';
import { setSettingOnce } from '../../store/settings.ts';

export { randomToken };

/** A signed-in session: its org, and the scope and actor of the token it signed in with (CONTRACT 2). */
export interface SignedIn extends Session {
  scope: Scope;
  actor: Actor;
}

/** The live session of a session cookie's value, or undefined (unknown or expired). */
export function sessionOf(ctx: AppContext, cookie: string): SignedIn | undefined {
  const s = getSession(ctx.db, cookie);
  if (!s) return undefined;
  // a session of a revoked token is gone with it (store/orgs.ts revokeToken); one from before
  // sessions kept their token has no actor to name and the scope tokens had then, admin
  if (s.token_id === null) return { ...s, scope: DEFAULT_SCOPE, actor: { token_id: null, token_name: null } };
  const t = liveTokenById(ctx.db, s.token_id);
  if (!t) return undefined;
  return { ...s, scope: t.scope, actor: { token_id: t.token_id, token_name: t.name } };
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
