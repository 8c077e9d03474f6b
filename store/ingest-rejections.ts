// Late refusals of durable ingest (CONTRACT 9): a fact the gate stored in SVC_FACTS that the engine
// refused when it applied it (what only the engine can judge). Written by the engine in the
// transaction that applies the fact; read by GET /v1/ingest/rejections, newest first (by seq, the
// order the engine applied them). Bounded twice: rows older than --event-retention are pruned with
// the event history (src/engine/history-pruner.ts), and each org keeps its newest MAX_PER_ORG.
import type { Db } from './db.ts';

/** The rows an org keeps at most: past it its oldest are deleted as new ones come. */
export const MAX_REJECTIONS_PER_ORG = 10_000;

export interface IngestRejectionInput {
  org_id: string;
  subject: string;
  /** ms epoch: when the gate received the fact */
  received_at: number;
  error: string;
  /** the message body as received, UTF-8 */
  fact: string;
}

export interface IngestRejectionRow extends IngestRejectionInput {
  seq: number;
}

/**
 * Keep refusals. Called by the engine inside its own open transaction (so a refusal is kept exactly
 * when the fact counts as applied): opens none. Each org's count (ingest_rejection_counts) moves in
 * the same transaction, so the cap is exact and costs the rows it deletes, never a count of the org's rows.
 */
export function recordIngestRejections(db: Db, rows: ReadonlyArray<IngestRejectionInput>, maxPerOrg = MAX_REJECTIONS_PER_ORG): void {
  if (!rows.length) return;
  const insert = db.prepare('INSERT INTO ingest_rejections (org_id, subject, received_at, error, fact) VALUES (?, ?, ?, ?, ?)');
  const added = new Map<string, number>();
  for (const r of rows) {
    insert.run(r.org_id, r.subject, r.received_at, r.error, r.fact);
    added.set(r.org_id, (added.get(r.org_id) ?? 0) + 1);
  }
  const count = db.prepare(
    `INSERT INTO ingest_rejection_counts (org_id, n) VALUES (?, ?)
     ON CONFLICT (org_id) DO UPDATE SET n = n + excluded.n RETURNING n`,
  );
  for (const [orgId, n] of added) {
    const total = (count.get(orgId, n) as { n: number }).n;
    if (total > maxPerOrg) dropOldest(db, orgId, total - maxPerOrg);
  }
}

/** Delete an org's `n` oldest rows (a range of its (org_id, seq) index) and count them off. */
function dropOldest(db: Db, orgId: string, n: number): void {
  const gone = db
    .prepare(
      `DELETE FROM ingest_rejections WHERE org_id = @org
         AND seq <= (SELECT seq FROM ingest_rejections WHERE org_id = @org ORDER BY seq LIMIT 1 OFFSET @skip)`,
    )
    .run({ org: orgId, skip: n - 1 }).changes;
  countOff(db, orgId, gone);
}

function countOff(db: Db, orgId: string, n: number): void {
  if (n > 0) db.prepare('UPDATE ingest_rejection_counts SET n = MAX(0, n - ?) WHERE org_id = ?').run(n, orgId);
}

export interface IngestRejectionQuery {
  orgId: string;
  /** rows received before this (ms) are past the retention: never listed, pruned or not yet */
  keptSinceMs: number;
  /** the page goes down from this seq (exclusive); 0: from the newest */
  beforeSeq: number;
  limit: number;
}

/** An org's refusals, newest first (by seq), below a seq. */
export function listIngestRejections(db: Db, q: IngestRejectionQuery): IngestRejectionRow[] {
  return db
    .prepare(
      `SELECT seq, org_id, subject, received_at, error, fact FROM ingest_rejections
       WHERE org_id = ? AND seq < ? AND received_at >= ? ORDER BY seq DESC LIMIT ?`,
    )
    .all(q.orgId, q.beforeSeq > 0 ? q.beforeSeq : Number.MAX_SAFE_INTEGER, q.keptSinceMs, q.limit) as IngestRejectionRow[];
}

/**
 * Delete the rows received before `beforeMs` (the retention prune, on the received_at index); how
 * many. Each org's count goes down by what it lost, in the same transaction.
 */
export function pruneIngestRejections(db: Db, beforeMs: number): number {
  return db.transaction(() => {
    const lost = db
      .prepare('SELECT org_id, COUNT(*) AS n FROM ingest_rejections WHERE received_at < ? GROUP BY org_id')
      .all(beforeMs) as Array<{ org_id: string; n: number }>;
    if (!lost.length) return 0;
    const n = db.prepare('DELETE FROM ingest_rejections WHERE received_at < ?').run(beforeMs).changes;
    for (const l of lost) countOff(db, l.org_id, l.n);
    db.prepare('DELETE FROM ingest_rejection_counts WHERE n <= 0').run();
    return n;
  })();
}
