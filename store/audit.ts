// The audit log (CONTRACT 2 "Scopes and actors"): one row per write, with its actor. Written by the
// engine's transaction (src/engine/transaction.ts Tx.audit), in the transaction of the change it
// records, and by the database commands (src/cli/local.ts) in theirs. Never a request body or a secret.
import type { Db } from './db.ts';
import { randomUUID } from 'node:crypto';
import type { AuditEntry } from '../src/domain/scopes.ts';

export interface AuditRow {
  seq: number;
  audit_id: string;
  org_id: string;
  at: string;
  token_id: string | null;
  token_name: string | null;
  action: string;
  resource_type: string | null;
  resource_id: string | null;
  status: number | null;
}

/**
 * A row's id: `aud_` and 20 hex digits of a random UUID (CONTRACT 2 ids: lowercase [a-z0-9_]; 76
 * random bits: the UUID's version digit is left out). randomUUID draws from a buffer it refills in
 * batches, where randomBytes asks the system each time: a tenth of the row's cost (issue 31).
 */
const auditId = () => {
  const u = randomUUID();
  return `aud_${u.slice(0, 8)}${u.slice(9, 13)}${u.slice(15, 18)}${u.slice(19, 23)}${u.slice(24, 25)}`;
};

/**
 * Write the row. Its seq is the org's newest + 1, read first: every writer (the engine, the
 * database commands) runs in an IMMEDIATE transaction, so nothing writes between the read and the
 * insert. (One `INSERT … SELECT MAX(seq) + 1 FROM audit_log` costs more: SQLite copies a SELECT
 * from the table it inserts into through a temporary table first.)
 */
export function insertAudit(db: Db, e: AuditEntry, at: { iso: string; ms: number }): void {
  const newest = db.prepare('SELECT MAX(seq) AS seq FROM audit_log WHERE org_id = ?').get(e.org_id) as { seq: number | null };
  db.prepare(
    `INSERT INTO audit_log (org_id, seq, audit_id, at, at_ms, token_id, token_name, action, resource_type, resource_id, status)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  ).run(
    e.org_id,
    (newest.seq ?? 0) + 1,
    auditId(),
    at.iso,
    at.ms,
    e.actor.token_id,
    e.actor.token_name,
    e.action,
    e.resource_type,
    e.resource_id,
    e.status,
  );
}

export interface AuditQuery {
  orgId: string;
  sinceMs: number | null;
  untilMs: number | null;
  actor: string | null;
  action: string | null;
  resourceId: string | null;
  afterSeq: number;
  limit: number;
  /** newest first (the dashboard; the API is oldest first): `afterSeq` is then the seq the page goes down from (0: the newest) */
  newestFirst?: boolean;
}

/** An org's rows after a seq, oldest first, or below a seq, newest first. */
export function listAudit(db: Db, q: AuditQuery): AuditRow[] {
  const where = ['org_id = ?'];
  const args: unknown[] = [q.orgId];
  if (!q.newestFirst) where.push('seq > ?'), args.push(q.afterSeq);
  else if (q.afterSeq > 0) where.push('seq < ?'), args.push(q.afterSeq);
  if (q.sinceMs !== null) where.push('at_ms >= ?'), args.push(q.sinceMs);
  if (q.untilMs !== null) where.push('at_ms < ?'), args.push(q.untilMs);
  if (q.actor !== null) where.push('token_id = ?'), args.push(q.actor);
  if (q.action !== null) where.push('action = ?'), args.push(q.action);
  if (q.resourceId !== null) where.push('resource_id = ?'), args.push(q.resourceId);
  return db
    .prepare(
      `SELECT seq, audit_id, org_id, at, token_id, token_name, action, resource_type, resource_id, status
       FROM audit_log WHERE ${where.join(' AND ')} ORDER BY seq${q.newestFirst ? ' DESC' : ''} LIMIT ?`,
    )
    .all(...args, q.limit) as AuditRow[];
}

/**
 * Delete the rows older than `beforeMs` (the retention prune); how many. Each org's rows are written
 * in time order, so its old ones are those before its first row still kept: found by walking its
 * range from the oldest, the cost the rows pruned. (An org whose every row is pruned starts its seq
 * again at 1: a cursor older than the retention then skips rows; it pointed at nothing kept anyway.)
 */
export function pruneAudit(db: Db, beforeMs: number): number {
  const del = db.prepare(
    `DELETE FROM audit_log WHERE org_id = @org AND at_ms < @cut
       AND seq < COALESCE((SELECT seq FROM audit_log WHERE org_id = @org AND at_ms >= @cut ORDER BY seq LIMIT 1), 9007199254740991)`,
  );
  let n = 0;
  for (const { org_id } of db.prepare('SELECT org_id FROM orgs').all() as Array<{ org_id: string }>)
    n += del.run({ org: org_id, cut: beforeMs }).changes;
  return n;
}

/** An org's successful changes (2xx, or a database command's) to these resources, oldest first. */
export function changesTo(db: Db, orgId: string, resourceIds: string[], actions: string[] | null = null): AuditRow[] {
  if (!resourceIds.length) return [];
  const marks = (n: number) => Array.from({ length: n }, () => '?').join(', ');
  const byAction = actions ? ` AND action IN (${marks(actions.length)})` : '';
  return db
    .prepare(
      `SELECT seq, audit_id, org_id, at, token_id, token_name, action, resource_type, resource_id, status
       FROM audit_log WHERE org_id = ? AND resource_id IN (${marks(resourceIds.length)})${byAction}
         AND (status IS NULL OR status BETWEEN 200 AND 299)
       ORDER BY seq`,
    )
    .all(orgId, ...resourceIds, ...(actions ?? [])) as AuditRow[];
}
