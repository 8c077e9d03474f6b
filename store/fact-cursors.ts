// How far the engine applied the SVC_FACTS stream (CONTRACT 9 "Durable ingest"), kept in the same
// transaction as the facts' effects so that each fact is applied exactly once across any crash. The
// engine applies facts fairly between orgs (src/ingest/fact-stream.ts), so one number is not enough:
// the watermark (every fact up to it applied) and, for an org that got ahead of it, that org's last
// fact applied.
import type { Db } from './db.ts';

/** The org id of the watermark's row. */
const WATERMARK = '';

export interface FactCursors {
  /** every fact with a seq up to this one is applied (0: none) */
  watermark: number;
  /** an org's last fact applied, where it is past the watermark */
  orgs: Map<string, number>;
}

export function loadFactCursors(db: Db): FactCursors {
  const rows = db.prepare('SELECT org_id, seq FROM fact_cursors').all() as Array<{ org_id: string; seq: number }>;
  const cursors: FactCursors = { watermark: 0, orgs: new Map() };
  for (const r of rows) {
    if (r.org_id === WATERMARK) cursors.watermark = r.seq;
    else cursors.orgs.set(r.org_id, r.seq);
  }
  for (const [org, seq] of cursors.orgs) if (seq <= cursors.watermark) cursors.orgs.delete(org);
  return cursors;
}

const UPSERT = 'INSERT INTO fact_cursors (org_id, seq) VALUES (?, ?) ON CONFLICT (org_id) DO UPDATE SET seq = excluded.seq';

/**
 * Inside the transaction that applied them: the orgs' last facts applied and the watermark. Rows
 * the watermark passed are dropped now and then (`prune`): they say nothing the watermark does not.
 */
export function saveFactCursors(db: Db, watermark: number, orgs: ReadonlyMap<string, number>, prune: boolean): void {
  const upsert = db.prepare(UPSERT);
  upsert.run(WATERMARK, watermark);
  for (const [org, seq] of orgs) if (seq > watermark) upsert.run(org, seq);
  if (prune) db.prepare("DELETE FROM fact_cursors WHERE org_id <> '' AND seq <= ?").run(watermark);
}
