// Dashboard sessions. The cookie carries a random session token; the table keeps only its SHA-256
// (a copy of the database does not hold live sessions), the org and the session's CSRF token.
import { createHash, randomBytes } from 'node:crypto';
import type { Db } from './db.ts';

export interface Session {
  org_id: string;
  /** the API token it signed in with (null: a session from before tokens were kept with it) */
  token_id: string | null;
  csrf: string;
  created_at: string;
  expires_at: string;
}

const hash = (token: string) => createHash('sha256').update(token).digest('hex');
export const randomToken = () => randomBytes(32).toString('base64url');

/** Create a session; returns the cookie value (shown to the browser only) and the row. */
export function createSession(
  db: Db,
  orgId: string,
  ttlMs: number,
  now = new Date(),
  tokenId: string | null = null,
): { token: string; session: Session } {
  const token = randomToken();
  const session: Session = {
    org_id: orgId,
    token_id: tokenId,
    csrf: randomToken(),
    created_at: now.toISOString(),
    expires_at: new Date(now.getTime() + ttlMs).toISOString(),
  };
  db.prepare('DELETE FROM sessions WHERE expires_at <= ?').run(session.created_at);
  db.prepare('INSERT INTO sessions (session_id, org_id, csrf, created_at, expires_at, token_id) VALUES (?, ?, ?, ?, ?, ?)').run(
    hash(token),
    session.org_id,
    session.csrf,
    session.created_at,
    session.expires_at,
    tokenId,
  );
  return { token, session };
}

/** The live session of a cookie value, or undefined (unknown or expired). */
export function getSession(db: Db, token: string, now = new Date()): Session | undefined {
  return db
    .prepare('SELECT org_id, token_id, csrf, created_at, expires_at FROM sessions WHERE session_id = ? AND expires_at > ?')
    .get(hash(token), now.toISOString()) as Session | undefined;
}

export function deleteSession(db: Db, token: string): void {
  db.prepare('DELETE FROM sessions WHERE session_id = ?').run(hash(token));
}
