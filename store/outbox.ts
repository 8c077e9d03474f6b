// The outbox: events committed with the facts that caused them (one SQLite transaction), each with
// its route, and recoveries' items. In NATS mode a row lives until JetStream has stored it (and an
// emitted event has an outbox row only when no history is kept: otherwise its history row is its
// queue row, store/history.ts insertQueuedEvent); in embedded mode the outbox is
// the delivery queue itself: a row lives until every attempt it needs has an outcome, and
// `progress` lists the webhooks already attempted, so that a restart repeats none of them.
import fs from 'node:fs';
import Database from 'better-sqlite3';
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
  /** the encoded route (src/domain/event-route.ts) */
  route: string;
  /** webhook ids already attempted (embedded mode) */
  progress: string[];
  /**
   * NATS mode: the batch the row is published in (src/bus/hop.ts), fixed at commit; a batch's rows
   * are consecutive in seq. Null: a batch of its own (embedded mode, rows from before migration 9).
   */
  batch: string | null;
}

/** Insert a row (in `batch`, if given); returns its sequence number. */
export function insertOutbox(db: Db, e: Omit<OutboxRow, 'seq' | 'progress' | 'batch'>, batch: string | null = null): number {
  const r = db
    .prepare('INSERT INTO outbox (event_id, org_id, subject, type, body, route, created_at, batch) VALUES (?, ?, ?, ?, ?, ?, ?, ?)')
    .run(e.event_id, e.org_id, e.subject, e.type, e.body, e.route, nowIso(), batch);
  return Number(r.lastInsertRowid);
}

/** Rows after a sequence number, oldest first. */
export function readOutbox(db: Db, afterSeq: number, limit: number): OutboxRow[] {
  const rows = db
    .prepare('SELECT seq, event_id, org_id, subject, type, body, route, progress, batch FROM outbox WHERE seq > ? ORDER BY seq LIMIT ?')
    .all(afterSeq, limit) as StoredOutboxRow[];
  return rows.map(outboxRowOf);
}

type StoredOutboxRow = Omit<OutboxRow, 'progress'> & { progress: string | null };

/** A row as read, every field named (a spread of it makes rows of many shapes, and their readers slow). */
const outboxRowOf = (r: StoredOutboxRow): OutboxRow => ({
  seq: r.seq,
  event_id: r.event_id,
  org_id: r.org_id,
  subject: r.subject,
  type: r.type,
  body: r.body,
  route: r.route ?? '',
  progress: fromJson<string[]>(r.progress, []),
  batch: r.batch,
});

/**
 * Orgs with rows after a sequence number, and the last of each (embedded mode's relay learns from it
 * which orgs have events waiting): one pass over those rows only (NOT INDEXED: by the key's range,
 * not a scan of every row in index outbox_org; measured 0.05 ms against 13 ms over 20,000 rows).
 */
export function outboxOrgsAfter(db: Db, afterSeq: number): Array<{ org_id: string; last: number }> {
  return db.prepare('SELECT org_id, MAX(seq) AS last FROM outbox NOT INDEXED WHERE seq > ? GROUP BY org_id').all(afterSeq) as Array<{
    org_id: string;
    last: number;
  }>;
}

/** One org's rows after a sequence number, oldest first (index outbox_org). */
export function readOrgOutbox(db: Db, orgId: string, afterSeq: number, limit: number): OutboxRow[] {
  const rows = db
    .prepare(
      'SELECT seq, event_id, org_id, subject, type, body, route, progress, batch FROM outbox ' +
        'WHERE org_id = ? AND seq > ? ORDER BY seq LIMIT ?',
    )
    .all(orgId, afterSeq, limit) as StoredOutboxRow[];
  return rows.map(outboxRowOf);
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

/** A batch JetStream has stored (NATS mode): its rows' seq range and its batch (null: one row alone). */
export interface PublishedBatch {
  first: number;
  last: number;
  batch: string | null;
}

/** Delete the rows of stored batches (in the caller's transaction): one range scan of the key each. */
export function deleteOutboxBatches(db: Db, batches: readonly PublishedBatch[]): void {
  const stmt = db.prepare('DELETE FROM outbox WHERE seq BETWEEN ? AND ? AND batch IS ?');
  for (const b of batches) stmt.run(b.first, b.last, b.batch);
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

/**
 * Embedded mode's delivery ledger, in a file of its own beside the database (`<db>-delivered`),
 * written only by the delivery thread: which rows are delivered, and which webhooks a slow row has
 * had (its progress). Writing it never waits for the engine's write lock, and is durable at once
 * (WAL, like the database), so a restart skips a delivered row and repeats none of a row's
 * recorded attempts (CONTRACT 6.6: nothing but attempts in flight repeats). Delivered rows are
 * then deleted from the outbox in batches (prune), and their records after them. Every record
 * names the row's event: one whose row is gone, or whose seq now holds another event, means nothing.
 */
export class DeliveryLedger {
  private readonly db: Db;
  private readonly markStmt: Database.Statement;
  private readonly progressStmt: Database.Statement;
  private readonly forgetStmts: Database.Statement[];

  constructor(dbFile: string) {
    const file = `${dbFile}-delivered`;
    fs.closeSync(fs.openSync(file, 'a', 0o600));
    this.db = new Database(file);
    this.db.pragma('journal_mode = WAL');
    this.db.pragma('synchronous = NORMAL');
    this.db.pragma('busy_timeout = 5000');
    this.db.exec(`
      CREATE TABLE IF NOT EXISTS delivered (seq INTEGER PRIMARY KEY, event_id TEXT NOT NULL);
      CREATE TABLE IF NOT EXISTS progress (seq INTEGER PRIMARY KEY, event_id TEXT NOT NULL, done TEXT NOT NULL);`);
    this.markStmt = this.db.prepare(
      'INSERT OR REPLACE INTO delivered (seq, event_id) ' +
        "SELECT json_extract(value, '$.seq'), json_extract(value, '$.event_id') FROM json_each(?)",
    );
    this.progressStmt = this.db.prepare(
      'INSERT OR REPLACE INTO progress (seq, event_id, done) ' +
        "SELECT json_extract(value, '$.seq'), json_extract(value, '$.event_id'), json_extract(value, '$.done') FROM json_each(?)",
    );
    this.forgetStmts = ['delivered', 'progress'].map((t) =>
      this.db.prepare(`DELETE FROM ${t} WHERE seq IN (SELECT value FROM json_each(?))`),
    );
  }

  /** Mark rows delivered (one transaction). */
  mark(marks: ReadonlyArray<{ seq: number; event_id: string }>): void {
    if (marks.length) this.markStmt.run(JSON.stringify(marks));
  }

  /** Record the webhooks rows have had (one transaction). */
  saveProgress(rows: ReadonlyArray<{ seq: number; event_id: string; done: readonly string[] }>): void {
    if (rows.length)
      this.progressStmt.run(JSON.stringify(rows.map((r) => ({ seq: r.seq, event_id: r.event_id, done: JSON.stringify(r.done) }))));
  }

  /**
   * At start, what the previous thread left: the rows of the outbox marked delivered (to delete,
   * never to hand over), and the progress of the others, by seq. Records of rows no longer in the
   * outbox are dropped.
   */
  load(outbox: Db): { delivered: number[]; progress: Map<number, { event_id: string; done: string[] }> } {
    const marks = this.db.prepare('SELECT seq, event_id FROM delivered').all() as Array<{ seq: number; event_id: string }>;
    const recs = this.db.prepare('SELECT seq, event_id, done FROM progress').all() as Array<{
      seq: number;
      event_id: string;
      done: string;
    }>;
    const there = outbox.prepare('SELECT 1 AS x FROM outbox WHERE seq = ? AND event_id = ?');
    const gone: number[] = [];
    const delivered: number[] = [];
    for (const m of marks) (there.get(m.seq, m.event_id) ? delivered : gone).push(m.seq);
    const progress = new Map<number, { event_id: string; done: string[] }>();
    for (const r of recs) {
      if (there.get(r.seq, r.event_id)) progress.set(r.seq, { event_id: r.event_id, done: fromJson<string[]>(r.done, []) });
      else gone.push(r.seq);
    }
    this.forget(gone);
    return { delivered, progress };
  }

  /** Delete delivered rows from the outbox (one write transaction of the database), then their records. */
  prune(outbox: Db, seqs: readonly number[]): void {
    if (!seqs.length) return;
    deleteOutbox(outbox, seqs);
    this.forget(seqs);
  }

  private forget(seqs: readonly number[]): void {
    if (!seqs.length) return;
    const list = JSON.stringify(seqs);
    this.db.transaction(() => {
      for (const s of this.forgetStmts) s.run(list);
    })();
  }

  close(): void {
    this.db.close();
  }
}
