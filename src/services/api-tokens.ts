// An org's API tokens (CONTRACT 2): the token a bearer token is (its org and scope), and the tokens
// an org lists, creates (the plaintext returned once) and revokes.
import type { AppContext } from '../context.ts';
import { NotFoundError } from '../domain/errors.ts';
import type { Scope } from '../domain/scopes.ts';
import {
  createToken as dbCreateToken,
  listTokens as dbListTokens,
  lookupToken,
  revokeToken as dbRevokeToken,
  type LiveToken,
} from '../../store/orgs.ts';

/** The live token a bearer token is (its org, name and scope); undefined for an unknown or revoked token. */
export const tokenOf = (ctx: AppContext, token: string): LiveToken | undefined => lookupToken(ctx.db, token);

export const listTokens = (ctx: AppContext, orgId: string) => dbListTokens(ctx.db, orgId);

/** A new token: its id, scope and plaintext (shown once, never stored). */
export const createToken = (ctx: AppContext, orgId: string, name: string | null, scope: Scope) => dbCreateToken(ctx.db, orgId, name, scope);

/** Revoke an org's token (404 when the org has no such token). */
export function revokeToken(ctx: AppContext, orgId: string, tokenId: string): void {
  if (!dbRevokeToken(ctx.db, orgId, tokenId)) throw new NotFoundError('token', tokenId);
}
