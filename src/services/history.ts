// Event history, attempt logs, recover and resend (CONTRACT 4.5): one function per operation,
// shared by the API, the CLI (over the API) and the dashboard.
import type { AppContext } from '../context.ts';
import { DEFAULT_EVENT_RETENTION_MS } from '../config.ts';
import { within } from '../domain/clock.ts';
import { timeBoundMs } from '../domain/duration.ts';
import { ConflictError, InvalidError, NotFoundError } from '../domain/errors.ts';
import { newId } from '../domain/ids.ts';
import { RESEND } from '../delivery/signing.ts';
import { entryOf } from '../handoff/registry-replicator.ts';
import type { AttemptResult } from '../delivery/client.ts';
import { parseExchange, type KeptExchange } from '../delivery/exchange-record.ts';
import { getWebhook as dbGetWebhook, type WebhookRow } from '../../store/webhooks.ts';
import { hasDeadLetter } from '../../store/dead-letters.ts';
import { openCursor, sealCursor, type CursorScope } from './cursors.ts';
import {
  getEvent as dbGetEvent,
  getRecovery as dbGetRecovery,
  attemptsPerHour as dbAttemptsPerHour,
  listAttempts as dbListAttempts,
  listEvents as dbListEvents,
  listKeyEvents as dbListKeyEvents,
  keyNeighbours,
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
  /** the headers svc sent (signatures cut to 8 characters); only with include=request; null: not kept (or nothing sent) */
  request?: KeptExchange['request'];
  /** the receiver's status, headers and first 4 KiB of body; only with include=response; null: no response (or not kept) */
  response?: KeptExchange['response'];
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
  /** one ordering key's events, in sequence order (CONTRACT 10.1) */
  order_key?: string;
  after_sequence?: number;
  after?: string;
  limit?: number;
  /** the dashboard's newest-first listing (not an API parameter: GET /v1/events is oldest first, CONTRACT 4.5); its cursors are its own */
  newest_first?: boolean;
}

export interface AttemptListInput {
  since?: string;
  until?: string;
  outcome?: 'success' | 'failure';
  event_id?: string;
  after?: string;
  limit?: number;
  /** `request`, `response` or both, comma separated (CONTRACT 4.5: ?include=request,response) */
  include?: string;
}

export interface RecoverInput {
  /** a window of time; or, instead, order_key and after_sequence (CONTRACT 10.1) */
  since?: string;
  until?: string;
  order_key?: string;
  after_sequence?: number;
  /** inclusive */
  until_sequence?: number;
  only_failed?: boolean;
  /** events emitted before the webhook was created too */
  backfill?: boolean;
}

export const DEFAULT_PAGE = 100;
/**
 * How long POST …/recover waits for the window to be looked at in full before answering with a count still growing
 * (CONTRACT 4.5: within 1 s).
 */
const PREPARE_WAIT_MS = 200;

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

/** The sequence number an `after` cursor of this list stands for (0: from the start); opaque, CONTRACT 8. */
function cursor(ctx: AppContext, scope: CursorScope, text: string | undefined): number {
  return text === undefined ? 0 : openCursor(ctx.db, scope, text);
}

const eventsScope = (orgId: string, newestFirst = false): CursorScope => (newestFirst ? `events-newest:${orgId}` : `events:${orgId}`);
const attemptsScope = (orgId: string, webhookId: string): CursorScope => `attempts:${orgId}:${webhookId}`;

const eventJson = (e: StoredEvent): CloudEventJson => JSON.parse(e.body) as CloudEventJson;

/** GET /v1/events: the org's kept events, oldest first (newest first with `newest_first`, the dashboard's). */
export function listEvents(ctx: AppContext, orgId: string, q: EventListInput): Page<CloudEventJson> {
  return eventPage(ctx, orgId, q, eventJson);
}

/**
 * The same page as JSON text, each event's stored text as it is (the CloudEvent exactly as
 * delivered): no parse and no stringify of what was serialised when it was stored. A page of 500
 * events costs the engine's thread a fraction of what the parsed page does (CONTRACT §8).
 */
export function listEventsJsonText(ctx: AppContext, orgId: string, q: EventListInput): string {
  const page = eventPage(ctx, orgId, q, (e) => e.body);
  return `{"data":[${page.data.join(',')}],"next_cursor":${JSON.stringify(page.next_cursor)}}`;
}

function eventPage<T>(ctx: AppContext, orgId: string, q: EventListInput, map: (e: StoredEvent) => T): Page<T> {
  if (q.order_key !== undefined) return keyEventPage(ctx, orgId, q, map);
  if (q.after_sequence !== undefined)
    throw new InvalidError('invalid request: after_sequence: only with order_key', [
      { path: 'after_sequence', message: 'only with order_key' },
    ]);
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
    afterSeq: cursor(ctx, eventsScope(orgId, q.newest_first), q.after),
    limit: limit + 1,
    newestFirst: q.newest_first === true,
  });
  const more = rows.length > limit;
  const page = more ? rows.slice(0, limit) : rows;
  return {
    data: page.map(map),
    next_cursor: more ? sealCursor(ctx.db, eventsScope(orgId, q.newest_first), page[page.length - 1].seq) : null,
  };
}

const keyScope = (orgId: string, key: string): CursorScope => `events-key:${orgId}:${key}`;

/**
 * One ordering key's kept events in sequence order, above after_sequence (CONTRACT 10.1); the other
 * filters apply too (a window of time, a type, a subject prefix), on the page read.
 */
function keyEventPage<T>(ctx: AppContext, orgId: string, q: EventListInput, map: (e: StoredEvent) => T): Page<T> {
  const key = q.order_key!;
  const now = ctx.clock.now();
  const kept = keptSince(ctx);
  if (!Number.isFinite(kept)) return { data: [], next_cursor: null };
  const since = q.since !== undefined ? Math.max(kept, timeBound(q.since, now, 'since')) : kept;
  const until = q.until !== undefined ? timeBound(q.until, now, 'until') : null;
  const limit = q.limit ?? DEFAULT_PAGE;
  const rows = dbListKeyEvents(ctx.db, {
    orgId,
    orderKey: key,
    afterSequence: q.after_sequence ?? 0,
    afterSeq: cursor(ctx, keyScope(orgId, key), q.after),
    keptSinceMs: since,
    limit: limit + 1,
  });
  const more = rows.length > limit;
  const page = more ? rows.slice(0, limit) : rows;
  const wanted = (e: StoredEvent) =>
    (until === null || e.created_ms < until) &&
    (q.type === undefined || e.type === q.type) &&
    (q.subject_prefix === undefined || e.subject.startsWith(q.subject_prefix));
  return {
    data: page.filter(wanted).map(map),
    next_cursor: more ? sealCursor(ctx.db, keyScope(orgId, key), page[page.length - 1].seq) : null,
  };
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
    beforeSeq: cursor(ctx, attemptsScope(orgId, webhookId), q.after),
    limit: limit + 1,
    withExchange: q.include !== undefined && /request|response/.test(q.include),
  });
  const more = rows.length > limit;
  const page = more ? rows.slice(0, limit) : rows;
  const include = new Set((q.include ?? '').split(',').map((x) => x.trim()));
  const withRequest = include.has('request');
  const withResponse = include.has('response');
  const view = (a: StoredAttempt): AttemptView =>
    withRequest || withResponse ? withExchange(attemptView(a), a.exchange, withRequest, withResponse) : attemptView(a);
  return {
    data: page.map(view),
    next_cursor: more ? sealCursor(ctx.db, attemptsScope(orgId, webhookId), page[page.length - 1].seq) : null,
  };
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

/** The view with what its attempt kept of the exchange (null for attempts that kept nothing). */
function withExchange(v: AttemptView, stored: string | null | undefined, request: boolean, response: boolean): AttemptView {
  const kept = parseExchange(stored);
  if (request) v.request = kept?.request ?? null;
  if (response) v.response = kept?.response ?? null;
  return v;
}

/** Where an event is in its ordering key (CONTRACT 10.1): its key and sequence, the ids of the kept events before and after it. */
export interface KeyPlace {
  order_key: string;
  sequence: number;
  previous: string | null;
  next: string | null;
}

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
export function getEventAttempts(
  ctx: AppContext,
  orgId: string,
  eventId: string,
): { event: CloudEventJson; webhooks: EventAttempts[]; key: KeyPlace | null } {
  const kept = keptSince(ctx);
  const e = mustGetEvent(ctx, orgId, eventId);
  ctx.deliveryStatus.flush();
  const subject = e.subject;
  const byHook = new Map<string, EventAttempts>();
  for (const a of dbListEventAttempts(ctx.db, orgId, e.event_id, kept)) {
    let w = byHook.get(a.webhook_id);
    if (!w) byHook.set(a.webhook_id, (w = { webhook_id: a.webhook_id, webhook_url: a.webhook_url, attempts: [] }));
    w.attempts.push(withExchange(attemptView({ ...a, subject }), a.exchange, true, true));
  }
  const key =
    e.order_key && e.sequence
      ? { order_key: e.order_key, sequence: e.sequence, ...keyNeighbours(ctx.db, orgId, e.order_key, e.sequence, kept) }
      : null;
  return { event: eventJson(e), webhooks: [...byHook.values()], key };
}

/**
 * POST …/webhooks/{id}/resend: one attempt of a kept event at this webhook now, whatever its
 * subscription, answered like a ping (CONTRACT 4.5): the event's own body and id, a fresh
 * webhook-timestamp, `X-Svc-Recovery: resend`; counted in delivery_status and the attempt log.
 */
export async function resendEvent(ctx: AppContext, orgId: string, webhookId: string, eventId: string): Promise<AttemptResult> {
  const { w, e } = resendable(ctx, orgId, webhookId, eventId);
  return ctx.attemptNow(w, e.event_id, e.type, Buffer.from(e.body, 'utf8'), RESEND);
}

/** The webhook and the kept event a resend would send (404 for either unknown, 409 for an event set aside). */
export function resendable(ctx: AppContext, orgId: string, webhookId: string, eventId: string): { w: WebhookRow; e: StoredEvent } {
  const w = mustGetWebhook(ctx, orgId, webhookId);
  const e = mustGetEvent(ctx, orgId, eventId);
  // CONTRACT 4.5: an event set aside as unpublishable (section 8) is never resent. It exists (GET
  // /v1/events has it), so not 404: 409, the state of the event forbids the operation (CONTRACT 3)
  if (hasDeadLetter(ctx.db, e.event_id))
    throw new ConflictError(`event ${e.event_id} was set aside as unpublishable (over the bus's limits); it is not resent`);
  return { w, e };
}

/**
 * POST …/webhooks/{id}/recover: one new attempt at this webhook alone for every kept event of the
 * window that it matches now, emitted after it was created (or, with backfill, before too) and
 * (only_failed, the default) that never got through to it (CONTRACT 4.5). The engine checks the
 * bounds (one running per webhook, 4 per org), keeps the recovery with its window and a cursor, and
 * feeds its items into the queue at the pace their attempts come back (src/engine/recoveries.ts).
 * Answered once the window is looked at in full, or after PREPARE_WAIT_MS with a count still growing.
 */
export async function recoverWebhook(
  ctx: AppContext,
  orgId: string,
  webhookId: string,
  input: RecoverInput,
): Promise<{ recovery_id: string; events: number }> {
  const { recovery_id } = startRecovery(ctx, orgId, webhookId, input);
  return recoveryAnswer(ctx, orgId, webhookId, recovery_id);
}

/** The recovery checked against its bounds and kept (synchronous: one change with its audit row); fed behind the caller. */
export function startRecovery(
  ctx: AppContext,
  orgId: string,
  webhookId: string,
  input: RecoverInput,
): { recovery_id: string; events: number } {
  const w = mustGetWebhook(ctx, orgId, webhookId);
  const now = ctx.clock.now();
  const byKey = input.order_key !== undefined;
  if (!byKey && input.since === undefined)
    throw new InvalidError('invalid request: since is required (or order_key and after_sequence)', [
      { path: 'since', message: 'required' },
    ]);
  // a gap of one key (CONTRACT 10.1): every kept event of it, by its sequence
  const asked = byKey ? Number.NEGATIVE_INFINITY : timeBound(input.since!, now, 'since');
  const until = !byKey && input.until !== undefined ? timeBound(input.until, now, 'until') : null;
  if (until !== null && until < asked)
    throw new InvalidError('invalid request: until: before since', [{ path: 'until', message: 'before since' }]);
  const onlyFailed = input.only_failed ?? true;
  const recoveryId = newId('rcv');
  // what the last second's outcomes added is still in memory: write it first
  if (onlyFailed) ctx.deliveryStatus.flush();
  const entry = entryOf(w);
  ctx.engine.beginRecovery({
    recoveryId,
    orgId,
    webhookId,
    // past the retention nothing is kept: an empty window
    sinceMs: Math.max(asked, Math.min(keptSince(ctx), Number.MAX_SAFE_INTEGER)),
    untilMs: until,
    sequences: byKey ? { key: input.order_key!, after: input.after_sequence ?? 0, until: input.until_sequence ?? null } : null,
    onlyFailed,
    backfill: input.backfill ?? false,
    subscription: { interests: entry.interests, match: entry.match, ...(entry.filter ? { filter: entry.filter } : {}) },
  });
  return { recovery_id: recoveryId, events: 0 };
}

/** The 202 of a recovery started: once its window is looked at in full, or after PREPARE_WAIT_MS with a count still growing. */
export async function recoveryAnswer(
  ctx: AppContext,
  orgId: string,
  webhookId: string,
  recoveryId: string,
): Promise<{ recovery_id: string; events: number }> {
  await within(ctx.clock, ctx.engine.recoveryPrepared(recoveryId), PREPARE_WAIT_MS);
  const r = dbGetRecovery(ctx.db, orgId, webhookId, recoveryId);
  return { recovery_id: recoveryId, events: r?.events ?? 0 };
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
    state: r.finished_ms !== null ? 'done' : 'running',
    events: r.events,
    attempted,
    succeeded: Math.min(r.succeeded, attempted),
    failed: Math.min(r.failed, attempted - Math.min(r.succeeded, attempted)),
  };
}

/** One hour of a webhook's attempts (the dashboard's chart, CONTRACT 4.1 watchdog). */
export interface AttemptHour {
  /** the hour's start, ISO 8601 */
  start: string;
  success: number;
  failure: number;
}

/** Attempts counted at most for the chart (a busier webhook's oldest hours are left out). */
const CHART_ROWS = 500_000;

/**
 * A webhook's kept attempts over the last 24 h by hour and outcome, oldest first: 24 whole hours,
 * the last one the current hour.
 */
export function attemptsPerHour(ctx: AppContext, orgId: string, webhookId: string): AttemptHour[] {
  mustGetWebhook(ctx, orgId, webhookId);
  ctx.deliveryStatus.flush();
  const HOUR = 3_600_000;
  const since = (Math.floor(ctx.clock.now() / HOUR) - 23) * HOUR;
  const out: AttemptHour[] = Array.from({ length: 24 }, (_, i) => ({
    start: new Date(since + i * HOUR).toISOString(),
    success: 0,
    failure: 0,
  }));
  const kept = keptSince(ctx);
  if (!Number.isFinite(kept)) return out;
  for (const r of dbAttemptsPerHour(ctx.db, webhookId, since, kept, CHART_ROWS)) {
    const h = out[r.hour];
    if (!h) continue;
    if (r.ok) h.success += r.n;
    else h.failure += r.n;
  }
  return out;
}
