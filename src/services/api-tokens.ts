// An org's API tokens (CONTRACT 2): the org a bearer token is for, and the tokens an org lists,
// creates (the plaintext returned once) and revokes.
import type { AppContext } from '../context.ts';
import { NotFoundError } from '../domain/errors.ts';
import { createToken as dbCreateToken, listTokens as dbListTokens, orgOfToken as dbOrgOfToken, revokeToken as dbRevokeToken } from '../../store/orgs.ts';

/** The org whose API token this is; undefined for an unknown or revoked token. */
export const orgOfToken = (ctx: AppContext, token: string): string | undefined => dbOrgOfToken(ctx.db, token);

export const listTokens = (ctx: AppContext, orgId: string) => dbListTokens(ctx.db, orgId);

/** A new token: its id and its plaintext (shown once, never stored). */
export const createToken = (ctx: AppContext, orgId: string, name: string | null) => dbCreateToken(ctx.db, orgId, name);

/** Revoke an org's token (404 when the org has no such token). */
export function revokeToken(ctx: AppContext, orgId: string, tokenId: string): void {
  if (!dbRevokeToken(ctx.db, orgId, tokenId)) throw new NotFoundError('token', tokenId);
}
