// Dead letters (CONTRACT 8): what the bus cannot carry whatever the limits (an event over 256 KiB,
// a route header or a registry entry JetStream or NATS refuses for its size), kept with its reason
// instead of being retried in front of everything behind it. Registry entries are kept without
// their secrets.
import type { Db } from './db.ts';
import { nowIso } from './db.ts';
import type { OutboxRow } from './outbox.ts';

export type DeadLetterKind = 'event' | 'registry';

export interface DeadLetter {
  id: string;
  kind: DeadLetterKind;
  org_id: string;
  /** the event id, or the webhook id */
  item_id: string;
  reason: string;
  /** JSON */
  data: string;
  created_at: string;
}

/**
 * Set an outbox row aside: kept as a dead letter and deleted from the outbox, in one transaction.
 * Returns false when it was set aside before (the row is deleted all the same). `inOutbox` false:
 * the row is a queued history row (NATS mode), which stays in the history.
 */
export function setAsideEvent(db: Db, row: OutboxRow, reason: string, inOutbox = true): boolean {
  const data = JSON.stringify({ subject: row.subject, type: row.type, route: row.route, body: row.body });
  let added = false;
  db.transaction(() => {
    added =
      db
        .prepare(
          'INSERT INTO dead_letters (id, kind, org_id, item_id, reason, data, created_at) ' +
            "VALUES (?, 'event', ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
        )
        .run(row.event_id, row.org_id, row.event_id, reason, data, nowIso()).changes > 0;
    if (inOutbox) db.prepare('DELETE FROM outbox WHERE seq = ?').run(row.seq);
  })();
  return added;
}

/** Keep a registry entry (already without secrets) as a dead letter under `id`; false when it was kept before. */
export function setAsideRegistryEntry(db: Db, id: string, orgId: string, webhookId: string, reason: string, data: string): boolean {
  return (
    db
      .prepare(
        'INSERT INTO dead_letters (id, kind, org_id, item_id, reason, data, created_at) ' +
          "VALUES (?, 'registry', ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
      )
      .run(id, orgId, webhookId, reason, data, nowIso()).changes > 0
  );
}

export function hasDeadLetter(db: Db, id: string): boolean {
  return db.prepare('SELECT 1 FROM dead_letters WHERE id = ?').get(id) !== undefined;
}

/** Dead letters, newest first (all orgs, or one). */
export function listDeadLetters(db: Db, opts: { orgId?: string; kind?: DeadLetterKind; limit?: number } = {}): DeadLetter[] {
  return db
    .prepare(
      'SELECT id, kind, org_id, item_id, reason, data, created_at FROM dead_letters ' +
        'WHERE (? IS NULL OR org_id = ?) AND (? IS NULL OR kind = ?) ORDER BY created_at DESC, rowid DESC LIMIT ?',
    )
    .all(opts.orgId ?? null, opts.orgId ?? null, opts.kind ?? null, opts.kind ?? null, opts.limit ?? 100) as DeadLetter[];
}

/**
 * Delete the dead letters set aside before the cut-off (ms; CONTRACT 8: pruned with
 * --event-retention, on the engine's clock, as the history is). How many went.
 */
export function pruneDeadLetters(db: Db, cutoffMs: number): number {
  return db.prepare('DELETE FROM dead_letters WHERE created_at < ?').run(new Date(cutoffMs).toISOString()).changes;
}
