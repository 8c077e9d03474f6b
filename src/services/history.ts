// Event history, attempt logs, recover and resend (CONTRACT 4.5): one function per operation,
// shared by the API, the CLI (over the API) and the dashboard.
import type { AppContext } from '../context.ts';
import { DEFAULT_EVENT_RETENTION_MS } from '../config.ts';
import { timeBoundMs } from '../domain/duration.ts';
import { InvalidError, NotFoundError } from '../domain/errors.ts';
import { newId } from '../domain/ids.ts';
import { RESEND } from '../outcomes/outcome.ts';
import { decodeRoute, encodeRoute, recoveryItemId } from '../domain/event-route.ts';
import { eventSubject } from '../bus/subjects.ts';
import { WebhookSubscriber } from '../dispatch/subscriber.ts';
import { entryOf } from '../relay/registry.ts';
import type { AttemptResult } from '../delivery/client.ts';
import { getWebhook as dbGetWebhook, type WebhookRow } from '../../store/webhooks.ts';
import { insertOutbox } from '../../store/outbox.ts';
import {
  deliveredEventIds,
  getEvent as dbGetEvent,
  getRecovery as dbGetRecovery,
  insertRecovery,
  lastEventSeq,
  recoveryQueued,
  listAttempts as dbListAttempts,
  listEvents as dbListEvents,
  listEventAttempts as dbListEventAttempts,
  type StoredAttempt,
  type StoredEvent,
} from '../../store/history.ts';

/** A CloudEvent as delivered (its JSON body). */
export type CloudEventJson = { specversion: string; id: string; source: string; type: string; [field: string]: unknown };

export interface Page<T> {
  data: T[];
  next_cursor: string | null;
}

export interface AttemptView {
  event_id: string;
  type: string;
  subject: string | null;
  attempted_at: string;
  outcome: 'success' | 'failure';
  status_code: number | null;
  error: string | null;
  duration_ms: number;
  recovery_id: string | null;
}

export interface RecoveryView {
  recovery_id: string;
  state: 'running' | 'done';
  events: number;
  attempted: number;
  succeeded: number;
  failed: number;
}

export interface EventListInput {
  since?: string;
  until?: string;
  type?: string;
  subject_prefix?: string;
  after?: string;
  limit?: number;
}

export interface AttemptListInput {
  since?: string;
  until?: string;
  outcome?: 'success' | 'failure';
  event_id?: string;
  after?: string;
  limit?: number;
}

export interface RecoverInput {
  since: string;
  until?: string;
  only_failed?: boolean;
}

export const DEFAULT_PAGE = 100;
const RECOVERY_CHUNK = 1000;

export function retentionMs(ctx: AppContext): number {
  return ctx.config.eventRetentionMs ?? DEFAULT_EVENT_RETENTION_MS;
}

/** What is kept starts here (ms, the engine's clock); past it an event is gone (404). */
function keptSince(ctx: AppContext): number {
  const keep = retentionMs(ctx);
  return keep > 0 ? ctx.clock.now() - keep : Number.POSITIVE_INFINITY;
}

/** `since`/`until`: ISO 8601, or a duration back from now (`2h`). */
export function timeBound(text: string, nowMs: number, field: string): number {
  const ms = timeBoundMs(text, nowMs);
  if (ms === null) {
    throw new InvalidError(`invalid request: ${field}: an ISO 8601 time or a duration back from now (e.g. 2h, 30m, 7d)`, [
      { path: field, message: 'an ISO 8601 time or a duration back from now (e.g. 2h, 30m, 7d)' },
    ]);
  }
  return ms;
}

function cursor(text: string | undefined, field = 'after'): number {
  if (text === undefined) return 0;
  if (!/^\d{1,15}$/.test(text)) throw new InvalidError(`invalid request: ${field}: not a cursor of this list`, [{ path: field, message: 'not a cursor of this list' }]);
  return Number(text);
}

const eventJson = (e: StoredEvent): CloudEventJson => JSON.parse(e.body) as CloudEventJson;

/** GET /v1/events: the org's kept events, oldest first. */
export function listEvents(ctx: AppContext, orgId: string, q: EventListInput): Page<CloudEventJson> {
  const now = ctx.clock.now();
  const kept = keptSince(ctx);
  const since = q.since !== undefined ? Math.max(kept, timeBound(q.since, now, 'since')) : kept;
  const until = q.until !== undefined ? timeBound(q.until, now, 'until') : null;
  const limit = q.limit ?? DEFAULT_PAGE;
  if (!Number.isFinite(since)) return { data: [], next_cursor: null };
  const rows = dbListEvents(ctx.db, {
    orgId,
    sinceMs: since,
    untilMs: until,
    type: q.type ?? null,
    subjectPrefix: q.subject_prefix ?? null,
    afterSeq: cursor(q.after),
    limit: limit + 1,
  });
  const more = rows.length > limit;
  const page = more ? rows.slice(0, limit) : rows;
  return { data: page.map(eventJson), next_cursor: more ? String(page[page.length - 1].seq) : null };
}

function mustGetEvent(ctx: AppContext, orgId: string, eventId: string): StoredEvent {
  const e = dbGetEvent(ctx.db, orgId, eventId, keptSince(ctx));
  if (!e) throw new NotFoundError('event', eventId);
  return e;
}

/** GET /v1/events/{event_id}: one kept event of the org (another org's, or one past retention: 404). */
export function getEvent(ctx: AppContext, orgId: string, eventId: string): CloudEventJson {
  return eventJson(mustGetEvent(ctx, orgId, eventId));
}

function mustGetWebhook(ctx: AppContext, orgId: string, id: string): WebhookRow {
  const w = dbGetWebhook(ctx.db, orgId, id);
  if (!w) throw new NotFoundError('webhook', id);
  return w;
}

/** GET …/webhooks/{id}/attempts: the webhook's kept attempts, newest first. */
export function listAttempts(ctx: AppContext, orgId: string, webhookId: string, q: AttemptListInput): Page<AttemptView> {
  mustGetWebhook(ctx, orgId, webhookId);
  const now = ctx.clock.now();
  const kept = keptSince(ctx);
  if (!Number.isFinite(kept)) return { data: [], next_cursor: null };
  const limit = q.limit ?? DEFAULT_PAGE;
  // what the last second's outcomes added is still in memory: write it first
  ctx.deliveryStatus.flush();
  const rows = dbListAttempts(ctx.db, {
    webhookId,
    keptSinceMs: kept,
    sinceMs: q.since !== undefined ? timeBound(q.since, now, 'since') : null,
    untilMs: q.until !== undefined ? timeBound(q.until, now, 'until') : null,
    ok: q.outcome === undefined ? null : q.outcome === 'success',
    eventId: q.event_id ?? null,
    beforeSeq: cursor(q.after),
    limit: limit + 1,
  });
  const more = rows.length > limit;
  const page = more ? rows.slice(0, limit) : rows;
  return { data: page.map(attemptView), next_cursor: more ? String(page[page.length - 1].seq) : null };
}

const attemptView = (a: StoredAttempt): AttemptView => ({
  event_id: a.event_id,
  type: a.type,
  subject: a.subject,
  attempted_at: new Date(a.attempted_ms).toISOString(),
  outcome: a.ok ? 'success' : 'failure',
  status_code: a.status_code,
  error: a.error,
  duration_ms: a.duration_ms,
  recovery_id: a.recovery_id,
});

export interface EventAttempts {
  webhook_id: string;
  webhook_url: string;
  /** newest first */
  attempts: AttemptView[];
}

/**
 * One kept event and its kept attempts at each webhook of the org (the webhooks it never reached
 * are not listed); the dashboard's event page.
 */
export function getEventAttempts(ctx: AppContext, orgId: string, eventId: string): { event: CloudEventJson; webhooks: EventAttempts[] } {
  const kept = keptSince(ctx);
  const e = mustGetEvent(ctx, orgId, eventId);
  ctx.deliveryStatus.flush();
  const subject = e.subject;
  const byHook = new Map<string, EventAttempts>();
  for (const a of dbListEventAttempts(ctx.db, orgId, e.event_id, kept)) {
    let w = byHook.get(a.webhook_id);
    if (!w) byHook.set(a.webhook_id, (w = { webhook_id: a.webhook_id, webhook_url: a.webhook_url, attempts: [] }));
    w.attempts.push(attemptView({ ...a, subject }));
  }
  return { event: eventJson(e), webhooks: [...byHook.values()] };
}

/**
 * POST …/webhooks/{id}/resend: one attempt of a kept event at this webhook now, whatever its
 * subscription, answered like a ping (CONTRACT 4.5): the event's own body and id, a fresh
 * webhook-timestamp, `X-Svc-Recovery: resend`; counted in delivery_status and the attempt log.
 */
export async function resendEvent(ctx: AppContext, orgId: string, webhookId: string, eventId: string): Promise<AttemptResult> {
  const w = mustGetWebhook(ctx, orgId, webhookId);
  const e = mustGetEvent(ctx, orgId, eventId);
  return ctx.attemptNow(w, e.event_id, e.type, Buffer.from(e.body, 'utf8'), RESEND);
}

/**
 * POST …/webhooks/{id}/recover: one new attempt at this webhook alone for every kept event of the
 * window that it matches now and (only_failed, the default) that never got through to it. Each is a
 * queue item like any event (an outbox row, then in NATS mode a JetStream message), targeted at
 * this webhook: the same data plane, bounds and fairness, durable across kill -9 (CONTRACT 6.6).
 * The items are queued in transactions of RECOVERY_CHUNK events, yielding between them, so that a
 * large recovery does not hold the database (and every org's commits) for seconds; it answers once
 * all of them are queued.
 */
export async function recoverWebhook(ctx: AppContext, orgId: string, webhookId: string, input: RecoverInput): Promise<{ recovery_id: string; events: number }> {
  const w = mustGetWebhook(ctx, orgId, webhookId);
  const now = ctx.clock.now();
  const since = Math.max(keptSince(ctx), timeBound(input.since, now, 'since'));
  const until = input.until !== undefined ? timeBound(input.until, now, 'until') : null;
  const onlyFailed = input.only_failed ?? true;
  const sub = new WebhookSubscriber(entryOf(w));
  const recoveryId = newId('rcv');
  const rev = ctx.registryRevision();
  if (onlyFailed) ctx.deliveryStatus.flush();
  insertRecovery(ctx.db, { recovery_id: recoveryId, org_id: orgId, webhook_id: webhookId, created_ms: now });
  // the events kept when it was asked for: not those emitted while it is prepared (they are delivered as usual)
  const lastSeq = lastEventSeq(ctx.db);
  let events = 0;
  let after = 0;
  for (let more = Number.isFinite(since); more; ) {
    more = ctx.db
      .transaction(() => {
        const page = dbListEvents(ctx.db, { orgId, sinceMs: since, untilMs: until, type: null, subjectPrefix: null, afterSeq: after, limit: RECOVERY_CHUNK });
        const rows = page.filter((e) => e.seq <= lastSeq);
        if (!rows.length) return false;
        after = rows[rows.length - 1].seq;
        const delivered = onlyFailed ? deliveredEventIds(ctx.db, webhookId, rows.map((e) => e.event_id)) : null;
        let n = 0;
        for (const e of rows) {
          if (delivered?.has(e.event_id)) continue;
          const route = decodeRoute(e.route);
          if (!route || !sub.wants(route)) continue;
          const itemId = recoveryItemId(e.event_id, recoveryId);
          // the registry revision of now: a data plane waits until it holds the webhook as it is now
          const itemRoute = encodeRoute({ ...route, rev, recovery: { id: recoveryId, webhook: webhookId, event_id: e.event_id } });
          insertOutbox(ctx.db, {
            event_id: itemId,
            org_id: orgId,
            subject: eventSubject(e.subject),
            type: e.type,
            body: e.body,
            route: itemRoute,
            batch: ctx.outboxBatch(itemId, e.body.length + itemRoute.length),
          });
          n++;
        }
        recoveryQueued(ctx.db, recoveryId, n, false);
        events += n;
        return rows.length === RECOVERY_CHUNK && after < lastSeq;
      })
      .immediate();
    if (events > 0) ctx.deliveryQueued();
    if (more) await new Promise((r) => setImmediate(r));
  }
  recoveryQueued(ctx.db, recoveryId, 0, true);
  return { recovery_id: recoveryId, events };
}

/** GET …/webhooks/{id}/recoveries/{recovery_id}: how far a recovery has come. */
export function getRecovery(ctx: AppContext, orgId: string, webhookId: string, recoveryId: string): RecoveryView {
  mustGetWebhook(ctx, orgId, webhookId);
  ctx.deliveryStatus.flush();
  const r = dbGetRecovery(ctx.db, orgId, webhookId, recoveryId);
  if (!r) throw new NotFoundError('recovery', recoveryId);
  // an attempt in flight at a crash may be made twice (CONTRACT 6.6): never report more than asked
  const attempted = Math.min(r.attempted, r.events);
  return {
    recovery_id: r.recovery_id,
    state: r.prepared === 1 && attempted >= r.events ? 'done' : 'running',
    events: r.events,
    attempted,
    succeeded: Math.min(r.succeeded, attempted),
    failed: Math.min(r.failed, attempted - Math.min(r.succeeded, attempted)),
  };
}
