import type { Context, MiddlewareHandler } from 'hono';
import type { AppContext } from '../context.ts';
import type { Actor, Scope } from '../domain/scopes.ts';
import { tokenOf } from '../services/api-tokens.ts';
import { forbidden, unauthorized, type HttpError } from './http-error.ts';

/** Who sent a request: the token's id, name, scope and org (CONTRACT 2). */
export interface Caller {
  org_id: string;
  scope: Scope;
  actor: Actor;
}

export type AuthEnv = { Variables: { orgId: string; caller: Caller } };

/**
 * CONTRACT 2: Bearer token (401 if missing/unknown) for the org in X-Svc-Org-ID (403 otherwise).
 * `refused` hears a 403 of a known token (the audit log keeps refused writes; a 401 has no actor).
 */
export function requireOrg(
  ctx: AppContext,
  refused: (c: Context<AuthEnv>, caller: Caller, err: HttpError) => void,
): MiddlewareHandler<AuthEnv> {
  return async (c, next) => {
    const header = c.req.header('authorization') ?? '';
    const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
    if (!m) throw unauthorized();
    const token = tokenOf(ctx, m[1]);
    if (!token) throw unauthorized();
    const caller: Caller = { org_id: token.org_id, scope: token.scope, actor: { token_id: token.token_id, token_name: token.name } };
    const orgId = c.req.header('x-svc-org-id');
    const refuse = (err: HttpError) => {
      refused(c, caller, err);
      return err;
    };
    if (!orgId) throw refuse(forbidden('X-Svc-Org-ID header is required'));
    if (orgId !== token.org_id) throw refuse(forbidden('the API token is not valid for this org'));
    c.set('orgId', orgId);
    c.set('caller', caller);
    await next();
  };
}
