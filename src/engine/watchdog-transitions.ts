// The delivery watchdog's engine part (CONTRACT 4.1 "Delivery watchdog"): each webhook's pure machine
// (machines/webhook-watchdog.ts) stepped by the outcomes the status book passes on (a failure from
// the 5th of a streak, the success that ends one) and by the API's disable and enable. A transition
// is one transaction: the machine's new state on the webhook row and its events
// (`com.svc.webhook.delivery.v1`, to the org's other webhooks) in the outbox and the history. A
// change into or out of `disabled` is replicated to the data plane (the entry's `disabled`), where
// dispatch drops the webhook's attempts.
import type { Db } from '../../store/db.ts';
import type { DeliveryStatus } from '../../store/delivery-status.ts';
import { getWatch, setWatch, type WatchRow } from '../../store/webhooks.ts';
import {
  advanceWatchdog,
  watchContextOf,
  watchdogCares,
  type DisablePolicy,
  type Streak,
  type WatchContext,
  type WatchEmit,
  type WatchEvent,
  type WatchState,
} from '../../machines/webhook-watchdog.ts';
import { durationMs } from '../domain/duration.ts';
import type { WebhookDeliveryFact } from '../domain/facts.ts';
import type { Transactions } from './transaction.ts';

/** What the watchdog needs of an outcome. */
export interface WatchedOutcome {
  webhook_id: string;
  ok: boolean;
  /** when the attempt ended (ms) */
  at: number;
}

export function streakOf(s: Pick<DeliveryStatus, keyof Streak>): Streak {
  return {
    consecutive_failures: s.consecutive_failures,
    failing_since: s.failing_since,
    recover_since: s.recover_since,
    failed_events: s.failed_events,
    last_error: s.last_error,
    last_status_code: s.last_status_code,
  };
}

export function policyOf(d: WatchRow['disable_after']): DisablePolicy | null {
  if (!d) return null;
  const ms = durationMs(d.duration);
  return ms === null ? null : { failures: d.failures, duration_ms: ms };
}

/** The URL's host, with `:port` when it names one: never its path, query, user or secret (CONTRACT 6.2). */
export function urlHost(url: string): string {
  try {
    return new URL(url).host;
  } catch {
    return '';
  }
}

function factOf(w: WatchRow, e: WatchEmit, time: string): WebhookDeliveryFact {
  const s = e.streak;
  const delivery: WebhookDeliveryFact['delivery'] = {
    consecutive_failures: s.consecutive_failures,
    failing_since: s.failing_since,
    last_error: s.last_error,
    last_status_code: s.last_status_code,
  };
  if (e.type === 'recovered') {
    delivery.failed_events = s.failed_events;
    delivery.recover_since = s.recover_since;
  }
  if (e.type === 'disabled' && e.reason !== undefined) delivery.disabled_reason = e.reason;
  return {
    kind: 'webhook_delivery',
    transition: e.type,
    org_id: w.org_id,
    time,
    webhook: { id: w.webhook_id, url_host: urlHost(w.url) },
    delivery,
  };
}

export interface WatchResult {
  state: WatchState;
  context: WatchContext;
  /** what the transition emitted (empty when nothing changed) */
  emitted: WatchEmit[];
}

export class WebhookWatchdog {
  /** each webhook's watchdog as last read or written (null: no such webhook); the store is the truth */
  private readonly cache = new Map<string, WatchRow | null>();

  constructor(
    private readonly db: Db,
    private readonly tx: Transactions,
    /** replicate a webhook whose `disabled` changed to the data plane */
    private readonly replicate: (orgId: string, webhookId: string) => void,
  ) {}

  /** A webhook was changed (its disable_after) or deleted elsewhere: read it again next time. */
  forget(webhookId: string): void {
    this.cache.delete(webhookId);
  }

  private row(webhookId: string): WatchRow | null {
    let r = this.cache.get(webhookId);
    if (r === undefined) {
      r = getWatch(this.db, webhookId) ?? null;
      this.cache.set(webhookId, r);
    }
    return r;
  }

  /** An outcome the status book passes on, with the streak it makes (or, a success, the one it ended); true when the watchdog moved. */
  outcome(o: WatchedOutcome, status: Readonly<DeliveryStatus>): boolean {
    const w = this.row(o.webhook_id);
    if (!w) return false;
    const streak = streakOf(status);
    const e: WatchEvent = o.ok
      ? { type: 'success', streak }
      : { type: 'failure', streak, at: new Date(o.at).toISOString(), policy: policyOf(w.disable_after) };
    return this.step(w, e);
  }

  /** Disable by hand (CONTRACT 4.1 POST …/disable); already disabled: as it is. */
  disable(webhookId: string, status: Readonly<DeliveryStatus>, note?: string): WatchResult | null {
    const w = this.row(webhookId);
    if (!w) return null;
    return this.run(w, (at) => ({ type: 'disable', streak: streakOf(status), at, ...(note !== undefined ? { note } : {}) }));
  }

  /** Enable after a delivered ping (CONTRACT 4.1 POST …/enable); not disabled: as it is. */
  enable(webhookId: string, status: Readonly<DeliveryStatus>): WatchResult | null {
    const w = this.row(webhookId);
    if (!w) return null;
    return this.run(w, (at) => ({ type: 'enable', streak: streakOf(status), at }));
  }

  private step(w: WatchRow, e: WatchEvent): boolean {
    // the cheap test first: most outcomes that reach here (a long streak between thresholds) change nothing
    if (!watchdogCares(w.watch_state, watchContextOf(w.watch_ctx), e)) return false;
    return this.run(w, () => e).emitted.length > 0;
  }

  /**
   * One transition in one transaction: the new state on the webhook row, its events in the outbox.
   * Once committed, the cache follows and a change of `disabled` is replicated.
   */
  private run(w: WatchRow, event: (now: string) => WatchEvent): WatchResult {
    const context = watchContextOf(w.watch_ctx);
    const r = this.tx.run((t) => {
      const r = advanceWatchdog(w.watch_state, context, event(t.now));
      if (!r.changed) return r;
      setWatch(this.db, w.webhook_id, r.state, r.context);
      for (const x of r.emitted) t.emit(factOf(w, x, t.now));
      return r;
    });
    if (!r.changed) return { state: w.watch_state, context, emitted: [] };
    this.cache.set(w.webhook_id, { ...w, watch_state: r.state, watch_ctx: r.context });
    if ((w.watch_state === 'disabled') !== (r.state === 'disabled')) this.replicate(w.org_id, w.webhook_id);
    return { state: r.state, context: r.context, emitted: r.emitted };
  }
}
