// Durable ingest's late refusals (CONTRACT 9): facts acknowledged at ingest that the engine refused
// when it applied them (what only the engine can judge), newest first, the caller's org only. Kept
// by the engine (store/ingest-rejections.ts); read here by GET /v1/ingest/rejections, the CLI over
// it (`svc ingest rejections`) and the dashboard's page.
import type { AppContext } from '../context.ts';
import { listIngestRejections as dbList, type IngestRejectionRow } from '../../store/ingest-rejections.ts';
import { openCursor, sealCursor } from './cursors.ts';
import { DEFAULT_PAGE, retentionMs, type Page } from './history.ts';

export interface IngestRejectionView {
  subject: string;
  received_at: string;
  error: string;
  /** the body as received: its JSON when it parses, else the text */
  fact: unknown;
}

export interface IngestRejectionListInput {
  after?: string;
  limit?: number;
}

const scope = (orgId: string) => `ingest-rejections:${orgId}`;

/** The body as received: its JSON when it is JSON, else the text as it came (a producer's mistake is shown as made). */
function factOf(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

const view = (r: IngestRejectionRow): IngestRejectionView => ({
  subject: r.subject,
  received_at: new Date(r.received_at).toISOString(),
  error: r.error,
  fact: factOf(r.fact),
});

/** GET /v1/ingest/rejections: a page of the org's refusals, newest first; none older than --event-retention (`0` keeps none). */
export function listIngestRejections(ctx: AppContext, orgId: string, q: IngestRejectionListInput): Page<IngestRejectionView> {
  const beforeSeq = q.after === undefined ? 0 : openCursor(ctx.db, scope(orgId), q.after);
  const keep = retentionMs(ctx);
  if (keep <= 0) return { data: [], next_cursor: null };
  const limit = q.limit ?? DEFAULT_PAGE;
  const rows = dbList(ctx.db, { orgId, keptSinceMs: ctx.clock.now() - keep, beforeSeq, limit: limit + 1 });
  const more = rows.length > limit;
  const page = more ? rows.slice(0, limit) : rows;
  return { data: page.map(view), next_cursor: more ? sealCursor(ctx.db, scope(orgId), page[page.length - 1].seq) : null };
}
