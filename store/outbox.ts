// The outbox: events committed with the facts that caused them (one SQLite transaction), each with
// its route. In NATS mode a row lives until JetStream has stored it; in embedded mode the outbox is
// the delivery queue itself: a row lives until every attempt it needs has an outcome, and
// `progress` lists the webhooks already attempted, so that a restart repeats none of them.
import type { Db } from './db.ts';
import { fromJson, nowIso } from './db.ts';

export interface OutboxRow {
  seq: number;
  event_id: string;
  org_id: string;
  /** the NATS subject (svc.events.…) */
  subject: string;
  type: string;
  body: string;
  /** the encoded route (src/domain/route.ts) */
  route: string;
  /** webhook ids already attempted (embedded mode) */
  progress: string[];
}

/** Insert a row; returns its sequence number. */
export function insertOutbox(db: Db, e: Omit<OutboxRow, 'seq' | 'progress'>): number {
  const r = db.prepare('INSERT INTO outbox (event_id, org_id, subject, type, body, route, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)').run(
    e.event_id,
    e.org_id,
    e.subject,
    e.type,
    e.body,
    e.route,
    nowIso(),
  );
  return Number(r.lastInsertRowid);
}

/** Rows after a sequence number, oldest first. */
export function readOutbox(db: Db, afterSeq: number, limit: number): OutboxRow[] {
  const rows = db
    .prepare('SELECT seq, event_id, org_id, subject, type, body, route, progress FROM outbox WHERE seq > ? ORDER BY seq LIMIT ?')
    .all(afterSeq, limit) as Array<Omit<OutboxRow, 'progress'> & { progress: string | null }>;
  return rows.map((r) => ({ ...r, route: r.route ?? '', progress: fromJson<string[]>(r.progress, []) }));
}

/**
 * Delete rows (delivered, or stored by JetStream): one statement, so one short write transaction
 * however many rows (in embedded mode the delivery thread's deletes contend with the engine's
 * commits for the write lock).
 */
export function deleteOutbox(db: Db, seqs: readonly number[]): void {
  if (!seqs.length) return;
  if (seqs.length === 1) db.prepare('DELETE FROM outbox WHERE seq = ?').run(seqs[0]);
  else db.prepare('DELETE FROM outbox WHERE seq IN (SELECT value FROM json_each(?))').run(JSON.stringify(seqs));
}

/** Record which webhooks rows have been attempted at (embedded mode), in one transaction. */
export function saveOutboxProgress(db: Db, rows: ReadonlyArray<{ seq: number; done: readonly string[] }>): void {
  if (!rows.length) return;
  const stmt = db.prepare('UPDATE outbox SET progress = ? WHERE seq = ?');
  db.transaction(() => {
    for (const r of rows) stmt.run(JSON.stringify(r.done), r.seq);
  })();
}

export function outboxSize(db: Db): number {
  return (db.prepare('SELECT COUNT(*) AS n FROM outbox').get() as { n: number }).n;
}
