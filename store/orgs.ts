import { createHash, randomBytes } from 'node:crypto';
import type { Db } from './db.ts';
import { nowIso } from './db.ts';
import { newId } from '../src/domain/ids.ts';
import { DEFAULT_SCOPE, type Scope } from '../src/domain/scopes.ts';

export interface Org {
  org_id: string;
  name: string;
  created_at: string;
}

export interface TokenRow {
  token_id: string;
  org_id: string;
  name: string | null;
  /** what the token may do (CONTRACT 2); tokens made before scopes are admin */
  scope: Scope;
  created_at: string;
  revoked_at: string | null;
}

/** A live token, as a request signed with it knows it. */
export interface LiveToken {
  token_id: string;
  org_id: string;
  name: string | null;
  scope: Scope;
}

/** Tokens are stored as SHA-256 hashes; the plaintext is shown once. */
export function hashToken(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

function mintToken(): string {
  return `svc_${randomBytes(24).toString('base64url')}`;
}

export function createOrg(db: Db, name: string): { org: Org; api_token: string; token_id: string } {
  return db
    .transaction(() => {
      const org: Org = { org_id: newId('org'), name, created_at: nowIso() };
      db.prepare('INSERT INTO orgs (org_id, name, created_at) VALUES (?, ?, ?)').run(org.org_id, org.name, org.created_at);
      const t = createToken(db, org.org_id, 'default');
      return { org, ...t };
    })
    .immediate();
}

export function getOrg(db: Db, orgId: string): Org | undefined {
  return db.prepare('SELECT org_id, name, created_at FROM orgs WHERE org_id = ?').get(orgId) as Org | undefined;
}

/** How far the orgs table goes: its greatest rowid and its row count (a cheap look for new orgs). */
export interface OrgsMark {
  last: number;
  count: number;
}

export function orgsMark(db: Db): OrgsMark {
  const r = db.prepare('SELECT coalesce(max(rowid), 0) AS last, count(*) AS count FROM orgs').get() as OrgsMark;
  return { last: Number(r.last), count: Number(r.count) };
}

/** The orgs whose rowid is above `after` (0: every org), oldest first, with their rowid. */
export function listOrgsAfter(db: Db, after: number): Array<Org & { rowid: number }> {
  return db.prepare('SELECT rowid, org_id, name, created_at FROM orgs WHERE rowid > ? ORDER BY rowid').all(after) as Array<
    Org & { rowid: number }
  >;
}

export function createToken(
  db: Db,
  orgId: string,
  name: string | null,
  scope: Scope = DEFAULT_SCOPE,
): { token_id: string; api_token: string; scope: Scope } {
  const api_token = mintToken();
  const token_id = newId('tok');
  db.prepare('INSERT INTO api_tokens (token_id, org_id, name, token_hash, created_at, scope) VALUES (?, ?, ?, ?, ?, ?)').run(
    token_id,
    orgId,
    name,
    hashToken(api_token),
    nowIso(),
    scope,
  );
  return { token_id, api_token, scope };
}

/** The live token row of a (plaintext) token, or undefined for an unknown or revoked token. */
export function lookupToken(db: Db, token: string): LiveToken | undefined {
  return db
    .prepare('SELECT token_id, org_id, name, scope FROM api_tokens WHERE token_hash = ? AND revoked_at IS NULL')
    .get(hashToken(token)) as LiveToken | undefined;
}

/** A live token by its id (a dashboard session's), or undefined once revoked. */
export function liveTokenById(db: Db, tokenId: string): LiveToken | undefined {
  return db.prepare('SELECT token_id, org_id, name, scope FROM api_tokens WHERE token_id = ? AND revoked_at IS NULL').get(tokenId) as
    | LiveToken
    | undefined;
}

/** The org a (plaintext) token belongs to, or undefined for an unknown or revoked token. */
export function orgOfToken(db: Db, token: string): string | undefined {
  return lookupToken(db, token)?.org_id;
}

export function listTokens(db: Db, orgId: string): TokenRow[] {
  return db
    .prepare('SELECT token_id, org_id, name, scope, created_at, revoked_at FROM api_tokens WHERE org_id = ? ORDER BY rowid DESC')
    .all(orgId) as TokenRow[];
}

/** Revoke a token; dashboard sessions signed in with it end too. */
export function revokeToken(db: Db, orgId: string, tokenId: string): boolean {
  return db.transaction(() => {
    const r = db
      .prepare('UPDATE api_tokens SET revoked_at = ? WHERE org_id = ? AND token_id = ? AND revoked_at IS NULL')
      .run(nowIso(), orgId, tokenId);
    db.prepare('DELETE FROM sessions WHERE token_id = ?').run(tokenId);
    return r.changes > 0;
  })();
}
