import type { AppContext } from '../context.ts';
import { ConflictError, InvalidError, LimitExceededError, NotFoundError } from '../domain/errors.ts';
import type { EventFilter } from '../domain/event-filter.ts';
import { newId } from '../domain/ids.ts';
import {
  canonicalMatch,
  deliveryOf,
  effectiveInterests,
  normalizeMatch,
  storedInterests,
  type DisableAfter,
  type Interests,
  type Match,
} from '../domain/subscription.ts';
import {
  countWebhooks,
  deleteWebhook as dbDelete,
  getWebhook as dbGet,
  insertWebhook,
  listWebhooks as dbList,
  updateWebhook as dbUpdate,
  UniqueViolation,
  type WebhookDelivery,
  type WebhookRow,
} from '../../store/webhooks.ts';
import { NO_DELIVERIES, type DeliveryStatus } from '../../store/delivery-status.ts';
import { eventId, toCloudEvent } from '../events/cloudevent.ts';
import { EVENT_TYPES, type EventType } from '../events/catalog.ts';
import type { AttemptResult } from '../delivery/client.ts';
import { watchContextOf, type WatchState } from '../../machines/webhook-watchdog.ts';
import { startRecovery } from './history.ts';
import { filterProblems } from './filter-paths.ts';

/**
 * `delivery_status` as the API returns it (CONTRACT 4.1): the counters, and the delivery watchdog's
 * state with the streak (`failing` from the first `failing` event until a success).
 */
export interface DeliveryStatusView extends Omit<DeliveryStatus, 'failed_events'> {
  state: WatchState;
  disabled_at: string | null;
  disabled_reason: string | null;
}

/** The webhook as the API returns it (CONTRACT 4.1). The secret never leaves the store. */
export interface WebhookView {
  webhook_id: string;
  webhook_url: string;
  has_secret: boolean;
  interests: Interests;
  match: Match | null;
  created_at: string;
  updated_at: string;
  /** while a rotated-out secret still signs: when it stops (ISO 8601); else null */
  previous_secret_expires_at: string | null;
  /** CONTRACT 4.1: null never disables automatically */
  disable_after: DisableAfter | null;
  /** CONTRACT 10.2: the payload filter, null: none */
  filter: EventFilter | null;
  /** CONTRACT 10.1: {ordering: 'per_key'}, or null (no order) */
  delivery: WebhookDelivery | null;
  delivery_status: DeliveryStatusView;
}

/** The rotated-out secret's expiry, or null once it has passed (or when there is none). */
export function previousSecretExpiry(w: Pick<WebhookRow, 'previous_secret' | 'previous_secret_expires_at'>, nowMs: number): string | null {
  if (w.previous_secret === null || w.previous_secret_expires_at === null) return null;
  return Date.parse(w.previous_secret_expires_at) > nowMs ? w.previous_secret_expires_at : null;
}

export function statusView(w: Pick<WebhookRow, 'watch_state' | 'watch_ctx'>, status: DeliveryStatus): DeliveryStatusView {
  const { failed_events: _internal, ...counters } = status;
  void _internal;
  const watch = watchContextOf(w.watch_ctx);
  const disabled = w.watch_state === 'disabled';
  return {
    ...counters,
    state: w.watch_state,
    disabled_at: disabled ? watch.disabled_at : null,
    disabled_reason: disabled ? watch.disabled_reason : null,
  };
}

export function view(w: WebhookRow, status: DeliveryStatus, nowMs: number): WebhookView {
  return {
    webhook_id: w.webhook_id,
    webhook_url: w.url,
    has_secret: w.secret !== null,
    interests: effectiveInterests(w.interests),
    match: (w.match as Match | null) ?? null,
    created_at: w.created_at,
    updated_at: w.updated_at,
    previous_secret_expires_at: previousSecretExpiry(w, nowMs),
    disable_after: w.disable_after,
    filter: w.filter ?? null,
    delivery: w.delivery,
    delivery_status: statusView(w, status),
  };
}

const viewOne = (ctx: AppContext, w: WebhookRow) => view(w, ctx.deliveryStatus.get(w.webhook_id), ctx.clock.now());

export interface CreateWebhookInput {
  webhook_url: string;
  secret?: string;
  interests?: Interests;
  match?: Match | null;
  disable_after?: DisableAfter | null;
  /** CONTRACT 10.2; null or {}: none */
  filter?: EventFilter | null;
  delivery?: { ordering?: 'per_key' } | null;
}

export interface PatchWebhookInput {
  secret?: string | null;
  /** with a new secret: how long the old one keeps signing beside it (0 = a hard cut) */
  previous_secret_ttl_s?: number;
  interests?: Interests;
  match?: Match | null;
  /** omitted: unchanged; null: never disabled automatically */
  disable_after?: DisableAfter | null;
  /** omitted: unchanged; null or {}: no order */
  delivery?: { ordering?: 'per_key' } | null;
  /** omitted: unchanged; null or {}: removed (CONTRACT 10.2) */
  filter?: EventFilter | null;
}

/** A filter as kept: `{}` admits everything, so it is kept as none (like Outpost's). */
const keptFilter = (f: EventFilter | null | undefined): EventFilter | null => (f && Object.keys(f).length > 0 ? f : null);

/**
 * CONTRACT 10.2: a filter whose path no event type the interests admit can have is 400 naming the
 * path (its shape and bounds were checked with the body). `stored`: the interests as kept (null: none given).
 */
function checkFilterPaths(filter: EventFilter | null, stored: unknown): void {
  if (filter === null) return;
  const { interests, chosen } = storedInterests(stored);
  const details = filterProblems(filter, interests, !chosen);
  if (details.length) throw new InvalidError(`invalid request: ${details[0].path}: ${details[0].message}`, details);
}

const CONFLICT = 'a webhook with this webhook_url and match already exists in this org';

export function listWebhooks(ctx: AppContext, orgId: string): WebhookView[] {
  const statuses = ctx.deliveryStatus.list(orgId);
  const now = ctx.clock.now();
  return dbList(ctx.db, orgId).map((w) => view(w, statuses.get(w.webhook_id) ?? { ...NO_DELIVERIES }, now));
}

export function getWebhook(ctx: AppContext, orgId: string, id: string): WebhookView {
  return viewOne(ctx, mustGet(ctx, orgId, id));
}

function mustGet(ctx: AppContext, orgId: string, id: string): WebhookRow {
  const w = dbGet(ctx.db, orgId, id);
  if (!w) throw new NotFoundError('webhook', id);
  return w;
}

/**
 * Create a webhook: the one place every caller (API, dashboard, CLI over the API) goes through, so
 * the per-org limit of CONTRACT 8 (`--max-webhooks-per-org`) holds for all of them. The count and
 * the insert are one write transaction: two creates at the limit cannot both pass.
 */
export function createWebhook(ctx: AppContext, orgId: string, input: CreateWebhookInput): WebhookView {
  const match = normalizeMatch(input.match ?? null);
  const filter = keptFilter(input.filter);
  checkFilterPaths(filter, input.interests ?? null);
  const max = ctx.config.maxWebhooksPerOrg;
  try {
    const row = ctx.db
      .transaction(() => {
        const have = countWebhooks(ctx.db, orgId);
        if (have >= max) {
          throw new LimitExceededError(
            'webhooks_per_org',
            `webhooks per org: this org has ${have} webhooks, the limit is ${max} (--max-webhooks-per-org); delete one to create another`,
          );
        }
        return insertWebhook(ctx.db, {
          webhook_id: newId('wh'),
          org_id: orgId,
          url: input.webhook_url,
          secret: input.secret ?? null,
          previous_secret: null,
          previous_secret_expires_at: null,
          // none given: kept as none (read as all_events; src/domain/webhook-entry.ts implicit_interests)
          interests: input.interests ?? null,
          match,
          match_canonical: canonicalMatch(match),
          disable_after: input.disable_after ?? null,
          filter,
          delivery: deliveryOf(input.delivery),
        });
      })
      .immediate();
    ctx.webhookChanged(orgId, row.webhook_id);
    return viewOne(ctx, row);
  } catch (err) {
    if (err instanceof UniqueViolation) throw new ConflictError(CONFLICT);
    throw err;
  }
}

/** PATCH semantics of CONTRACT 4.1: naming interests or match replaces the whole subscription. */
export function patchWebhook(ctx: AppContext, orgId: string, id: string, input: PatchWebhookInput): WebhookView {
  const current = mustGet(ctx, orgId, id);
  const replacesSubscription = 'interests' in input || 'match' in input;
  const interests = replacesSubscription ? (input.interests ?? null) : current.interests;
  const match = replacesSubscription ? normalizeMatch(input.match ?? null) : (current.match as Match | null);
  const rotation = secretChange(current, input, ctx.clock.now());
  // a PATCH naming only the filter leaves the subscription as it was (CONTRACT 10.1); a new one is checked against it
  const filter = 'filter' in input ? keptFilter(input.filter) : current.filter;
  if ('filter' in input || replacesSubscription) checkFilterPaths(filter, interests);
  try {
    const row = dbUpdate(ctx.db, {
      org_id: orgId,
      webhook_id: id,
      ...rotation,
      interests,
      match,
      match_canonical: canonicalMatch(match),
      ...(input.disable_after !== undefined ? { disable_after: input.disable_after } : {}),
      ...('filter' in input ? { filter } : {}),
      ...(input.delivery !== undefined ? { delivery: deliveryOf(input.delivery) } : {}),
    });
    ctx.webhookChanged(orgId, id);
    return viewOne(ctx, row!);
  } catch (err) {
    if (err instanceof UniqueViolation) throw new ConflictError(CONFLICT);
    throw err;
  }
}

/**
 * The secret columns after a PATCH (CONTRACT 4.1): omitted = unchanged; null = removed (with any
 * previous one); a new string = rotated, the old one signing beside it for previous_secret_ttl_s
 * (0 or omitted = a hard cut).
 */
export function secretChange(
  current: Pick<WebhookRow, 'secret' | 'previous_secret' | 'previous_secret_expires_at'>,
  input: PatchWebhookInput,
  nowMs: number,
): Pick<WebhookRow, 'secret' | 'previous_secret' | 'previous_secret_expires_at'> {
  if (!('secret' in input)) {
    return {
      secret: current.secret,
      previous_secret: current.previous_secret,
      previous_secret_expires_at: current.previous_secret_expires_at,
    };
  }
  const secret = input.secret ?? null;
  const ttl = input.previous_secret_ttl_s ?? 0;
  if (secret === null || ttl <= 0 || current.secret === null || current.secret === secret) {
    return { secret, previous_secret: null, previous_secret_expires_at: null };
  }
  return { secret, previous_secret: current.secret, previous_secret_expires_at: new Date(nowMs + ttl * 1000).toISOString() };
}

export function deleteWebhook(ctx: AppContext, orgId: string, id: string): void {
  if (!dbDelete(ctx.db, orgId, id)) throw new NotFoundError('webhook', id);
  ctx.webhookChanged(orgId, id);
}

/** Send one ping event to this webhook alone, ignoring interests and match (CONTRACT 4.1, 6.4). */
export async function pingWebhook(ctx: AppContext, orgId: string, id: string): Promise<AttemptResult> {
  const w = mustGet(ctx, orgId, id);
  const ev = toCloudEvent(
    { kind: 'webhook_ping', transition: 'ping', org_id: orgId, webhook_id: id, time: new Date(ctx.clock.now()).toISOString() },
    { source: ctx.urls.source, baseUrl: ctx.urls.base, dashboardUrl: ctx.urls.dashboard },
  )!;
  return ctx.attemptNow(w, ev.id, ev.type, Buffer.from(JSON.stringify(ev), 'utf8'));
}

/** The catalog's type an example is asked of (CONTRACT 10.3); 400 naming the known types for another. */
export function exampleType(type: string): EventType {
  const known = EVENT_TYPES.get(type);
  if (!known) {
    const names = [...EVENT_TYPES.keys()].join(', ');
    throw new InvalidError(`unknown event type ${type}; known types: ${names}`, [{ path: 'type', message: `one of ${names}` }]);
  }
  return known;
}

/**
 * Send one signed example of a type to this webhook alone (CONTRACT 10.3 `POST …/examples`), as a
 * ping is sent: whatever its subscription, counted in its delivery status and attempt log, never
 * kept in the history. The catalog's example of the type, of this org, now, with a fresh id and the
 * extension `svcexample: true`; without `svcorderkey` and `sequence` (CONTRACT 10.1).
 */
export async function sendExample(ctx: AppContext, orgId: string, id: string, type: string): Promise<AttemptResult> {
  const w = mustGet(ctx, orgId, id);
  const now = ctx.clock.now();
  const ev = exampleType(type).example({
    baseUrl: ctx.urls.base,
    source: ctx.urls.source,
    dashboardUrl: ctx.urls.dashboard,
    orgId,
    id: eventId(now),
    time: new Date(now).toISOString(),
  });
  const { svcorderkey: _key, sequence: _seq, data, ...attributes } = ev as typeof ev & { svcorderkey?: string; sequence?: string };
  const example = { ...attributes, svcexample: true, data };
  return ctx.attemptNow(w, example.id, example.type, Buffer.from(JSON.stringify(example), 'utf8'));
}

/** POST …/disable (CONTRACT 4.1): no attempts from now on, its events still kept; `disabled` to the org's other webhooks. */
export function disableWebhook(ctx: AppContext, orgId: string, id: string, note?: string): WebhookView {
  mustGet(ctx, orgId, id);
  ctx.engine.watchdog.disable(id, ctx.deliveryStatus.get(id), note);
  ctx.deliveryStatus.flush(); // the streak the disable speaks of, kept with it
  return getWebhook(ctx, orgId, id);
}

/** What an enable's ping leaves for the enable itself: the streak as it stood before the ping ended it. */
export interface EnablePing {
  streak: DeliveryStatus;
}

/**
 * POST …/enable (CONTRACT 4.1), its first half (I/O, before the change): a ping; not delivered →
 * 409 with its error, still disabled. A recovery that could not start (one running, the org's
 * limit) is refused before anything changes.
 */
export async function pingBeforeEnable(ctx: AppContext, orgId: string, id: string, input: { recover?: boolean }): Promise<EnablePing> {
  mustGet(ctx, orgId, id);
  if (input.recover) ctx.engine.checkRecoveryBounds(orgId, id);
  const streak = ctx.deliveryStatus.get(id);
  const ping = await pingWebhook(ctx, orgId, id);
  if (!ping.delivered) {
    throw new ConflictError(
      `the webhook is still disabled: its ping was not delivered ` +
        `(${ping.error ?? (ping.status !== undefined ? `HTTP ${ping.status}` : 'no answer')})`,
    );
  }
  return { streak };
}

/**
 * The enable itself, once its ping was delivered (synchronous: one change with its audit row):
 * active (`enabled` to the org's other webhooks) and, with `recover`, a recovery of the failed and
 * missed events (only failed) since recover_since.
 */
export function enableAfterPing(
  ctx: AppContext,
  orgId: string,
  id: string,
  input: { recover?: boolean },
  ping: EnablePing,
): { webhook: WebhookView; recovery_id?: string } {
  const w = mustGet(ctx, orgId, id);
  const since =
    w.watch_state === 'disabled' ? (watchContextOf(w.watch_ctx).recover_since ?? ping.streak.recover_since) : ping.streak.recover_since;
  ctx.engine.watchdog.enable(id, ping.streak);
  let recovery_id: string | undefined;
  if (input.recover && since) recovery_id = startRecovery(ctx, orgId, id, { since, only_failed: true }).recovery_id;
  return { webhook: getWebhook(ctx, orgId, id), ...(recovery_id !== undefined ? { recovery_id } : {}) };
}
