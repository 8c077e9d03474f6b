// Delivery status per webhook (CONTRACT 4.1), the attempt log (4.5) and the delivery metrics (6.5),
// built from the outcome batches every data plane sends back, and from pings and resends. Held in
// memory and written to SQLite once a second (the attempts also as soon as ATTEMPTS_PER_WRITE wait;
// never a write per attempt); read back at start, so it survives a restart within about a second.
//
// The streak of failures (CONTRACT 4.1 watchdog: failing_since, recover_since, failed events) is
// kept here too, and told to the watchdog (the engine's, wired by src/server.ts) only when it may
// matter: a failure from the 5th of a streak on, or the success that ends a streak. A healthy
// webhook's outcomes never reach it.
import type { Logger } from 'pino';
import type { Db } from '../../store/db.ts';
import { getDeliveryStatus, listDeliveryStatus, saveDeliveryStatuses, type DeliveryStatus } from '../../store/delivery-status.ts';
import { getEvent, saveAttempts, type AttemptRow } from '../../store/history.ts';
import type { Clock, Timer } from '../domain/clock.ts';
import { RESEND } from '../delivery/signing.ts';
import type { DeliveryOutcome, OutcomeBatch } from './outcome.ts';
import type { Metrics } from '../metrics.ts';

const FLUSH_EVERY_MS = 1000;

/** The watchdog hears of failures from the 5th of a streak on (its first threshold, CONTRACT 4.1). */
const WATCH_FROM = 5;

const PING_TYPE = 'com.svc.webhook.ping.v1';

/**
 * Told of an outcome that may move a webhook's watchdog: a failure (with the streak it makes), or
 * the success that ended a streak (with the streak that ended). True when the watchdog moved: the
 * statuses are written at once, so that the streak its state and events speak of survives a crash.
 */
export type StreakWatcher = (o: DeliveryOutcome, streak: Readonly<DeliveryStatus>) => boolean;
const MAX_UNSAVED_ATTEMPTS = 100_000;
/**
 * The attempt log is written once a second, and besides as soon as this many attempts wait: a
 * second of a saturated data plane (15 000–20 000 attempts) written at once held the engine's
 * thread 135–230 ms (2 048: 10–13 ms), during which no fact was committed and no event published
 * and no producer answered (issue 33, BENCHMARKS.md).
 */
export const ATTEMPTS_PER_WRITE = 2048;
/**
 * The kept exchanges (request and response, src/delivery/exchange-record.ts) waiting for the attempt
 * log: written as soon as this many bytes wait, and at most UNSAVED_EXCHANGE_BYTES kept while the
 * log cannot be written (past it, attempts are kept without theirs): memory stays bounded (CONTRACT 8).
 */
const EXCHANGE_BYTES_PER_WRITE = 4 * 1024 * 1024;
const UNSAVED_EXCHANGE_BYTES = 32 * 1024 * 1024;

/** A data plane that has sent nothing for this long no longer counts in svc_deliveries_in_flight. */
const WORKER_STALE_MS = 10_000;

/**
 * An org a data plane said its deliveries queue for (OutcomeBatch.backlogged) counts as backlogged
 * for this long after (a few of a busy data plane's batches, one per 100 ms at least), or until
 * that data plane says they no longer do (OutcomeBatch.caught_up, sent as soon as they do not).
 */
export const BACKLOG_HEARD_MS = 300;

interface Live {
  org_id: string;
  status: DeliveryStatus;
  /** when the newest outcome applied ended (ms), to ignore older ones arriving late for the last_* fields */
  lastAt: number;
  /**
   * status.last_attempt_at is lastAt as text (false: not yet, see statusOf). Made when the status is
   * read or saved, not at each outcome: an ISO date is a formatted print in V8, and a saturated data
   * plane reports thousands of outcomes a second for the same few webhooks.
   */
  lastAtText: boolean;
  dirty: boolean;
  /**
   * The earliest failed event of the streak, by id (event ids begin with their time in ms, so they
   * order by it): outcomes come back out of order, and a failure of an earlier event moves
   * recover_since back. Only this process's; a streak read back at start keeps its recover_since.
   */
  earliest: string | null;
}

export class DeliveryStatusBook {
  private readonly live = new Map<string, Live>();
  private readonly workers = new Map<string, { inFlight: number; at: number }>();
  /** per org said to be backlogged, the data planes that said so and when they last did (clock ms) */
  private readonly backlog = new Map<string, Map<string, number>>();
  private readonly timer: Timer;
  /** attempts not yet in the attempt log (written with the statuses) */
  private attempts: AttemptRow[] = [];
  /** the length of their kept exchanges */
  private attemptExchangeBytes = 0;
  /** the last write of the attempt log failed: the next is the timer's (not one per batch) */
  private attemptWriteFailed = false;
  private readonly recoveryListeners: Array<(recoveryId: string, ok: boolean) => void> = [];
  private watcher: StreakWatcher | null = null;

  constructor(
    private readonly db: Db,
    private readonly metrics: Metrics,
    private readonly clock: Clock,
    private readonly logger: Logger,
    /** the attempt log (CONTRACT 4.5): kept when the retention is not 0, stamped with the engine's clock */
    private readonly attemptLog: { engineClock: Clock } | null = null,
  ) {
    this.timer = clock.setInterval(() => this.flush(), FLUSH_EVERY_MS);
  }

  /** Told of each outcome of a recovery's attempt as it arrives (the engine feeds recoveries at the pace of their outcomes). */
  onRecoveryAttempt(listener: (recoveryId: string, ok: boolean) => void): void {
    this.recoveryListeners.push(listener);
  }

  /** The delivery watchdog (one). */
  watchStreaks(watcher: StreakWatcher): void {
    this.watcher = watcher;
  }

  /** A batch from a data plane. */
  apply(batch: OutcomeBatch): void {
    const now = this.clock.now();
    this.workers.set(batch.worker, { inFlight: batch.in_flight, at: now });
    if (batch.backlogged) for (const org of batch.backlogged) this.backlogHeard(org, batch.worker, now);
    if (batch.caught_up) for (const org of batch.caught_up) this.backlog.get(org)?.delete(batch.worker);
    for (const [reason, n] of Object.entries(batch.dropped)) this.metrics.eventsDropped.inc({ reason }, n);
    // the batch's successes and failures counted once each (a labelled inc is a hash of its labels)
    let ok = 0;
    for (const o of batch.outcomes) {
      if (o.ok) ok++;
      this.applyOutcome(o);
    }
    if (ok) this.metrics.deliveries.inc({ outcome: 'success' }, ok);
    if (batch.outcomes.length > ok) this.metrics.deliveries.inc({ outcome: 'failure' }, batch.outcomes.length - ok);
    if ((this.attempts.length >= ATTEMPTS_PER_WRITE || this.attemptExchangeBytes >= EXCHANGE_BYTES_PER_WRITE) && !this.attemptWriteFailed)
      this.flushAttempts();
  }

  /** One outcome (a ping's, a resend's). */
  record(o: DeliveryOutcome): void {
    this.metrics.deliveries.inc({ outcome: o.ok ? 'success' : 'failure' });
    this.applyOutcome(o);
  }

  /** One outcome into the metrics (but svc_deliveries_total: the caller's), the attempt log and its webhook's status. */
  private applyOutcome(o: DeliveryOutcome): void {
    this.metrics.deliveryDuration.observe(o.duration_ms / 1000);
    if (o.recovery_id && o.recovery_id !== RESEND) {
      this.metrics.recoveryAttempts.inc({ outcome: o.ok ? 'success' : 'failure' });
      for (const l of this.recoveryListeners) l(o.recovery_id, o.ok);
    }
    if (this.attemptLog) {
      let exchange = o.exchange ?? null;
      if (exchange) {
        if (this.attemptExchangeBytes + exchange.length > UNSAVED_EXCHANGE_BYTES) exchange = null;
        else this.attemptExchangeBytes += exchange.length;
      }
      this.attempts.push({
        webhook_id: o.webhook_id,
        org_id: o.org_id,
        event_id: o.event_id,
        type: o.type,
        attempted_ms: Math.round(o.at - o.duration_ms),
        ok: o.ok,
        status_code: o.status,
        error: o.ok ? null : o.error,
        duration_ms: o.duration_ms,
        recovery_id: o.recovery_id ?? null,
        kept_ms: this.attemptLog.engineClock.now(),
        exchange,
      });
    }
    let l = this.live.get(o.webhook_id);
    if (!l) {
      l = { org_id: o.org_id, status: getDeliveryStatus(this.db, o.webhook_id), lastAt: 0, lastAtText: true, dirty: false, earliest: null };
      l.lastAt = l.status.last_attempt_at ? Date.parse(l.status.last_attempt_at) : 0;
      this.live.set(o.webhook_id, l);
    }
    const s = l.status;
    // the streak a success ends, as it stood (its last error included)
    const ended = o.ok && s.consecutive_failures > 0 ? { ...statusOf(l) } : null;
    s.attempts_total++;
    if (!o.ok) s.failures_total++;
    if (o.at >= l.lastAt) {
      l.lastAt = o.at;
      l.lastAtText = false;
      s.last_outcome = o.ok ? 'success' : 'failure';
      s.last_status_code = o.status;
      s.last_error = o.ok ? null : o.error;
    }
    l.dirty = true;
    if (o.ok) {
      if (!ended) return;
      s.consecutive_failures = 0;
      s.failing_since = null;
      s.recover_since = null;
      s.failed_events = 0;
      l.earliest = null;
      if (this.watcher?.(o, ended)) this.flush();
      return;
    }
    s.consecutive_failures++;
    s.failing_since ??= new Date(Math.round(o.at - o.duration_ms)).toISOString();
    if (o.type !== PING_TYPE) {
      s.failed_events++;
      if (s.recover_since === null || (l.earliest !== null && o.event_id < l.earliest)) {
        const time = this.eventTime(o.org_id, o.event_id) ?? s.failing_since;
        if (s.recover_since === null || (time !== null && time < s.recover_since)) s.recover_since = time;
        l.earliest = o.event_id;
      }
    }
    if (s.consecutive_failures >= WATCH_FROM && this.watcher?.(o, statusOf(l))) this.flush();
  }

  /** The `time` of a kept event (once per streak: where a recovery of it should start). */
  private eventTime(orgId: string, eventId: string): string | null {
    try {
      const e = getEvent(this.db, orgId, eventId, 0);
      const time = e ? (JSON.parse(e.body) as { time?: unknown }).time : undefined;
      return typeof time === 'string' ? time : null;
    } catch {
      return null;
    }
  }

  get(webhookId: string): DeliveryStatus {
    const l = this.live.get(webhookId);
    return l ? { ...statusOf(l) } : getDeliveryStatus(this.db, webhookId);
  }

  /** Statuses of an org's webhooks that have any (by webhook id). */
  list(orgId: string): Map<string, DeliveryStatus> {
    const out = listDeliveryStatus(this.db, orgId);
    for (const [id, l] of this.live) if (l.org_id === orgId) out.set(id, { ...statusOf(l) });
    return out;
  }

  /**
   * Whether a data plane said lately (BACKLOG_HEARD_MS) that the org's deliveries queue there: its
   * next events would wait behind them anyway (src/ingest/ingest.ts holds its facts a little).
   */
  backlogged(orgId: string): boolean {
    const by = this.backlog.get(orgId);
    if (by === undefined) return false;
    const now = this.clock.now();
    for (const [worker, at] of by) {
      if (now - at < BACKLOG_HEARD_MS) return true;
      by.delete(worker);
    }
    this.backlog.delete(orgId);
    return false;
  }

  private backlogHeard(orgId: string, worker: string, now: number): void {
    let by = this.backlog.get(orgId);
    if (!by) this.backlog.set(orgId, (by = new Map()));
    by.set(worker, now);
  }

  /** Attempts in flight over every data plane heard from lately. */
  inFlight(): number {
    const now = this.clock.now();
    let n = 0;
    for (const w of this.workers.values()) if (now - w.at < WORKER_STALE_MS) n += w.inFlight;
    return n;
  }

  /** Whether every outcome applied so far is written: its attempt (in the log) and the status it changed. */
  written(): boolean {
    if (this.attempts.length) return false;
    for (const l of this.live.values()) if (l.dirty) return false;
    return true;
  }

  /** Write the changed statuses (one transaction) and the attempts since the last flush (another). */
  flush(): void {
    this.flushAttempts();
    const rows: Array<{ webhook_id: string; org_id: string; status: DeliveryStatus }> = [];
    for (const [webhook_id, l] of this.live) {
      if (!l.dirty) continue;
      l.dirty = false;
      rows.push({ webhook_id, org_id: l.org_id, status: { ...statusOf(l) } });
    }
    if (!rows.length) return;
    try {
      saveDeliveryStatuses(this.db, rows);
    } catch (err) {
      for (const r of rows) {
        const l = this.live.get(r.webhook_id);
        if (l) l.dirty = true;
      }
      this.logger.warn({ err }, 'could not save delivery status; will try again');
    }
  }

  private flushAttempts(): void {
    if (!this.attempts.length) return;
    const rows = this.attempts;
    this.attempts = [];
    this.attemptExchangeBytes = 0;
    try {
      saveAttempts(this.db, rows);
      this.attemptWriteFailed = false;
    } catch (err) {
      this.attemptWriteFailed = true;
      // kept for the next flush (bounded: an attempt log that cannot be written loses its oldest)
      this.attempts = rows.concat(this.attempts).slice(-MAX_UNSAVED_ATTEMPTS);
      for (const a of this.attempts) this.attemptExchangeBytes += a.exchange?.length ?? 0;
      this.logger.warn({ err }, 'could not save the attempt log; will try again');
    }
  }

  /** Forget a deleted webhook. */
  forget(webhookId: string): void {
    this.live.delete(webhookId);
  }

  close(): void {
    this.timer.cancel();
    this.flush();
  }
}

/** A webhook's status with its last_attempt_at written out (Live.lastAtText). */
function statusOf(l: Live): DeliveryStatus {
  if (!l.lastAtText) {
    l.status.last_attempt_at = new Date(l.lastAt).toISOString();
    l.lastAtText = true;
  }
  return l.status;
}
