import type { Db } from './db.ts';
import { nowIso } from './db.ts';

export interface OutboxRow {
  seq: number;
  event_id: string;
  org_id: string;
  subject: string;
  type: string;
  body: string;
}

export function insertOutbox(db: Db, e: Omit<OutboxRow, 'seq'>): void {
  db.prepare('INSERT INTO outbox (event_id, org_id, subject, type, body, created_at) VALUES (?, ?, ?, ?, ?, ?)').run(
    e.event_id, e.org_id, e.subject, e.type, e.body, nowIso(),
  );
}

export function unpublished(db: Db, limit = 500): OutboxRow[] {
  return db.prepare('SELECT seq, event_id, org_id, subject, type, body FROM outbox WHERE published = 0 ORDER BY seq LIMIT ?').all(limit) as OutboxRow[];
}

/** Marks rows published, all in one transaction. */
export function markPublished(db: Db, seqs: number[]): void {
  const list = seqs;
  if (!list.length) return;
  const stmt = db.prepare('UPDATE outbox SET published = 1 WHERE seq = ?');
  db.transaction(() => {
    for (const seq of list) stmt.run(seq);
  })();
}

/** Published events older than the cutoff are only history; keep the table small. */
export function prunePublished(db: Db, olderThanIso: string): number {
  return db.prepare('DELETE FROM outbox WHERE published = 1 AND created_at < ?').run(olderThanIso).changes;
}
