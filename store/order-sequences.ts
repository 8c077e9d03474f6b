// The sequence of each ordering key (CONTRACT 10.1): the last one given per (org, key). Taken in
// the engine's transaction that emits the event, by one statement, so that a key's sequences are
// contiguous from 1 in commit order, and a rolled-back event gives its number back.
import type { Db } from './db.ts';

const NEXT =
  'INSERT INTO order_sequences (org_id, order_key, sequence) VALUES (?, ?, 1) ' +
  'ON CONFLICT (org_id, order_key) DO UPDATE SET sequence = sequence + 1 RETURNING sequence';

/** The next sequence of (org, key): 1 for a new key. Inside a transaction. */
export function nextOrderSequence(db: Db, orgId: string, orderKey: string): number {
  return (db.prepare(NEXT).get(orgId, orderKey) as { sequence: number }).sequence;
}

/** The last sequence given to (org, key), 0 when none. */
export function lastOrderSequence(db: Db, orgId: string, orderKey: string): number {
  const r = db.prepare('SELECT sequence FROM order_sequences WHERE org_id = ? AND order_key = ?').get(orgId, orderKey) as
    | { sequence: number }
    | undefined;
  return r?.sequence ?? 0;
}
