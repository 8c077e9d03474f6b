// The audit log (CONTRACT 2 "Scopes and actors"): who changed what, oldest first, the caller's org
// only. Written by the engine (src/engine/transaction.ts Tx.audit) with each change; read here by
// the API (GET /v1/audit), the CLI over it (`svc audit list`) and the dashboard's audit page.
import type { AppContext } from '../context.ts';
import { DEFAULT_AUDIT_RETENTION_MS } from '../config.ts';
import { changesTo, listAudit as dbListAudit, type AuditRow } from '../../store/audit.ts';
import { openCursor, sealCursor } from './cursors.ts';
import { DEFAULT_PAGE, timeBound, type Page } from './history.ts';

export interface AuditView {
  id: string;
  at: string;
  actor: { token_id: string | null; token_name: string | null };
  action: string;
  resource_type: string | null;
  resource_id: string | null;
  status: number | null;
}

export interface AuditListInput {
  since?: string;
  until?: string;
  actor?: string;
  action?: string;
  resource_id?: string;
  after?: string;
  limit?: number;
  /** the dashboard's newest-first listing (not an API parameter: GET /v1/audit is oldest first, CONTRACT 4.5); its cursors are its own */
  newest_first?: boolean;
}

const scope = (orgId: string, newestFirst = false) => (newestFirst ? `audit-newest:${orgId}` : `audit:${orgId}`);

const view = (r: AuditRow): AuditView => ({
  id: r.audit_id,
  at: r.at,
  actor: { token_id: r.token_id, token_name: r.token_name },
  action: r.action,
  resource_type: r.resource_type,
  resource_id: r.resource_id,
  status: r.status,
});

/** What is kept starts here (the engine's clock): rows older than --audit-retention are never shown, pruned or not yet. */
export const auditKeptSince = (ctx: AppContext) => ctx.clock.now() - (ctx.config.auditRetentionMs ?? DEFAULT_AUDIT_RETENTION_MS);

/** GET /v1/audit: a page of the org's audit log, oldest first (newest first with `newest_first`, the dashboard's). */
export function listAudit(ctx: AppContext, orgId: string, q: AuditListInput): Page<AuditView> {
  const now = ctx.clock.now();
  const since = Math.max(auditKeptSince(ctx), q.since !== undefined ? timeBound(q.since, now, 'since') : -Infinity);
  const limit = q.limit ?? DEFAULT_PAGE;
  const rows = dbListAudit(ctx.db, {
    orgId,
    sinceMs: since,
    untilMs: q.until !== undefined ? timeBound(q.until, now, 'until') : null,
    actor: q.actor ?? null,
    action: q.action ?? null,
    resourceId: q.resource_id ?? null,
    afterSeq: q.after === undefined ? 0 : openCursor(ctx.db, scope(orgId, q.newest_first), q.after),
    limit: limit + 1,
    newestFirst: q.newest_first === true,
  });
  const more = rows.length > limit;
  const page = more ? rows.slice(0, limit) : rows;
  return { data: page.map(view), next_cursor: more ? sealCursor(ctx.db, scope(orgId, q.newest_first), page[page.length - 1].seq) : null };
}

/**
 * Who last made each of these changes (the dashboard: who started a run or a recovery, who vetoed
 * a config): per resource id, its newest successful audit row of `actions` (all actions when null).
 */
export function changedBy(ctx: AppContext, orgId: string, resourceIds: string[], actions: string[] | null = null): Map<string, AuditView> {
  const out = new Map<string, AuditView>();
  const kept = auditKeptSince(ctx);
  for (const r of changesTo(ctx.db, orgId, resourceIds, actions))
    if (Date.parse(r.at) >= kept && r.resource_id) out.set(r.resource_id, view(r));
  return out;
}

/** A resource's successful changes, oldest first, with their actors (a workflow page: who started it, who cancelled it). */
export function changesOf(ctx: AppContext, orgId: string, resourceId: string): AuditView[] {
  const kept = auditKeptSince(ctx);
  return changesTo(ctx.db, orgId, [resourceId])
    .filter((r) => Date.parse(r.at) >= kept)
    .map(view);
}
