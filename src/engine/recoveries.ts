// Recoveries as paced work (CONTRACT 4.5 "Bounds", section 8; ARCHITECTURE: "a durable cursor over
// the history that the engine feeds into the outbox as the webhook's share of the data plane frees
// up"). A recovery row keeps its window and a cursor. The feeder moves the cursor a chunk of events
// at a time, keeping the items it finds (their seqs) in recovery_items, and queues those items in
// the outbox through the engine's transaction, a window of them at a time (in the outbox, in
// JetStream or in an attempt without an outcome yet: 16 to 512, as the webhook's outcomes allow);
// each outcome that comes back frees a place. So a recovery's size never reaches memory, the outbox
// or another org.
//
// Durable across kill -9: moving the cursor and keeping the items found commit together; queueing
// items, taking them out of recovery_items and counting them fed commit together (with the outbox
// rows). After a restart the feeder goes on from what is committed: nothing lost, nothing queued
// twice (an attempt in flight at the crash may be made again, CONTRACT 6.6).
import type { Logger } from 'pino';
import type { Db } from '../../store/db.ts';
import {
  allRunningRecoveries,
  deliveredEventIds,
  finishRecovery,
  insertRecovery,
  lastEventSeq,
  nextRecoveryItems,
  recoveryById,
  recoveryCandidates,
  recoveryFed,
  recoveryFound,
  runningRecoveries,
  type NewRecovery,
  type RecoveryRow,
} from '../../store/history.ts';
import { getWebhook, webhookCreatedSeq } from '../../store/webhooks.ts';
import { eventSubject } from '../bus/subjects.ts';
import { nextTurnOnce, type Clock, type Timer } from '../domain/clock.ts';
import { ConflictError, LimitExceededError } from '../domain/errors.ts';
import { decodeRoute, encodeRoute, recoveryItemId } from '../domain/event-route.ts';
import type { WebhookEntry } from '../domain/webhook-entry.ts';
import { ParsedEvent, WebhookSubscriber } from '../dispatch/subscriber.ts';
import type { QueueItem, Transactions } from './transaction.ts';

/**
 * Items of one recovery outstanding at once (in the outbox, in JetStream, or in an attempt without
 * an outcome yet): a window between 2 × the webhook's 8 delivery slots (CONTRACT 6.6) and
 * MAX_OUTSTANDING. It starts at the low end, grows by one with each success and halves with each
 * failure (never below the low end). A receiver that hangs or fails keeps its recovery at 16 items
 * (at 4 recoveries per org, 64 items of one org's recoveries in the shared queue and the data
 * plane's window); one that answers fast earns a window wide enough to keep its slots busy across
 * the outcomes' round trip (outcome batches come back about every 100 ms, so 16 items would cap a
 * fast receiver at ~160 attempts/s), and the data plane drains it as fast as it is fed.
 */
export const MIN_OUTSTANDING = 2 * 8;
export const MAX_OUTSTANDING = 512;
/** Running recoveries per org (CONTRACT 4.5). */
export const MAX_RECOVERIES_PER_ORG = 4;
/** Events looked at per step of a cursor (one short transaction; the event loop is yielded between). */
const SCAN_CHUNK = 1000;
/**
 * Outstanding items with no outcome for this long are taken as answered: an outcome lost with a
 * kill -9 (outcomes reach the attempt log once a second), or an item dropped unattempted (its
 * webhook disabled). Far above the delivery timeout, so that a hanging receiver is never fed faster.
 */
const LEASE_MS = 120_000;
/** How often the feeder looks at its recoveries without being told (leases, deleted webhooks). */
const TICK_MS = 1000;

/** A new recovery's window (CONTRACT 4.5), as the API checked it. */
export interface RecoveryRequest {
  recoveryId: string;
  orgId: string;
  webhookId: string;
  sinceMs: number;
  untilMs: number | null;
  /** instead of a window of time: the events of one ordering key in (after, until] of its sequence (CONTRACT 10.1) */
  sequences: { key: string; after: number; until: number | null } | null;
  onlyFailed: boolean;
  backfill: boolean;
  /** the webhook's subscription as it is now */
  subscription: Pick<WebhookEntry, 'interests' | 'match' | 'filter'>;
}

/** Where outcomes of recovery attempts are heard (src/outcomes/status-book.ts). */
export interface RecoveryOutcomeSource {
  onRecoveryAttempt(listener: (recoveryId: string, ok: boolean) => void): void;
}

interface Live {
  /** items queued whose outcome has not come back */
  outstanding: number;
  /** how many may be (MIN_OUTSTANDING to MAX_OUTSTANDING) */
  window: number;
  /** when the last outcome came back or the last item was queued (engine clock) */
  movedAt: number;
  /** set once the whole window has been looked at */
  waiters: Array<() => void>;
}

/**
 * The bounds of CONTRACT 4.5: at most one running recovery per webhook (409 conflict naming it,
 * checked first) and MAX_RECOVERIES_PER_ORG per org (409 limit_exceeded). Throws when one is reached.
 */
export function checkRecoveryBounds(db: Db, orgId: string, webhookId: string): void {
  const running = runningRecoveries(db, orgId);
  const same = running.find((r) => r.webhook_id === webhookId);
  if (same) throw new ConflictError(`a recovery of this webhook is running: ${same.recovery_id} (one at a time per webhook)`);
  if (running.length >= MAX_RECOVERIES_PER_ORG) {
    throw new LimitExceededError(
      'recoveries_per_org',
      `running recoveries per org: at most ${MAX_RECOVERIES_PER_ORG} (${running.map((r) => r.recovery_id).join(', ')})`,
    );
  }
}

export class RecoveryFeeder {
  private readonly live = new Map<string, Live>();
  private readonly timer: Timer;
  /** A round at the next turn, once however often asked; another after it while there is more to do. */
  private readonly roundSoon: () => void = nextTurnOnce(() => {
    if (this.closed) return;
    let more = false;
    try {
      more = this.round();
    } catch (err) {
      this.deps.logger.warn({ err }, 'feeding recoveries failed; will try again');
    }
    if (more) this.kick();
  });
  private closed = false;

  constructor(private readonly deps: { db: Db; clock: Clock; logger: Logger; tx: Transactions; registryRev: () => number }) {
    // what was running at the last stop (or crash) goes on from its cursor. What the last process
    // had out (its window, at most MAX_OUTSTANDING items) is not counted: their outcomes may have been lost
    // with it (the attempt log is written once a second), and waiting for them would stall the
    // recovery; so for one round after a restart a recovery may have up to twice that out.
    for (const r of allRunningRecoveries(deps.db))
      this.live.set(r.recovery_id, { outstanding: 0, window: MIN_OUTSTANDING, movedAt: deps.clock.now(), waiters: [] });
    this.timer = deps.clock.setInterval(() => this.kick(), TICK_MS);
    if (this.live.size) this.kick();
  }

  /**
   * Start a recovery (one transaction): at most one running per webhook (409 conflict naming it,
   * checked first) and MAX_RECOVERIES_PER_ORG per org (409 limit_exceeded).
   */
  begin(req: RecoveryRequest): void {
    const db = this.deps.db;
    this.deps.tx.run(() => {
      checkRecoveryBounds(db, req.orgId, req.webhookId);
      const row: NewRecovery = {
        recovery_id: req.recoveryId,
        org_id: req.orgId,
        webhook_id: req.webhookId,
        created_ms: this.deps.clock.now(),
        since_ms: req.sinceMs,
        until_ms: req.untilMs,
        order_key: req.sequences?.key ?? null,
        after_sequence: req.sequences?.after ?? null,
        until_sequence: req.sequences?.until ?? null,
        only_failed: req.onlyFailed ? 1 : 0,
        backfill: req.backfill ? 1 : 0,
        // emitted after the webhook was created, unless backfill; kept when it was asked for
        from_seq: req.backfill ? 0 : webhookCreatedSeq(db, req.webhookId),
        to_seq: lastEventSeq(db),
        rev: this.deps.registryRev(),
        subscription: JSON.stringify(req.subscription),
      };
      insertRecovery(db, row);
    });
    this.live.set(req.recoveryId, { outstanding: 0, window: MIN_OUTSTANDING, movedAt: this.deps.clock.now(), waiters: [] });
    this.kick();
  }

  /** Resolves once the recovery's whole window has been looked at (its `events` final), or it is gone. */
  prepared(recoveryId: string): Promise<void> {
    const l = this.live.get(recoveryId);
    const r = recoveryById(this.deps.db, recoveryId);
    if (!l || !r || r.prepared === 1) return Promise.resolve();
    return new Promise((resolve) => l.waiters.push(resolve));
  }

  /** An outcome of one of a recovery's attempts came back: its place is free, and the window moves. */
  attempted(recoveryId: string, ok: boolean): void {
    const l = this.live.get(recoveryId);
    if (!l) return;
    l.outstanding = Math.max(0, l.outstanding - 1);
    l.window = ok ? Math.min(MAX_OUTSTANDING, l.window + 1) : Math.max(MIN_OUTSTANDING, Math.floor(l.window / 2));
    l.movedAt = this.deps.clock.now();
    this.kick();
  }

  close(): void {
    this.closed = true;
    this.timer.cancel();
    for (const l of this.live.values()) for (const w of l.waiters.splice(0)) w();
  }

  /** Run a round soon (once, however often asked). */
  private kick(): void {
    if (this.closed || !this.live.size) return;
    this.roundSoon();
  }

  /** One step of every running recovery, oldest first; whether any has more to do now. */
  private round(): boolean {
    let more = false;
    const now = this.deps.clock.now();
    for (const [id, l] of this.live) {
      const r = recoveryById(this.deps.db, id);
      if (!r || r.finished_ms !== null) {
        this.forget(id, l);
        continue;
      }
      if (!getWebhook(this.deps.db, r.org_id, r.webhook_id)) {
        // its webhook was deleted: it stops (state done), what was not queued is dropped
        this.deps.tx.run(() => finishRecovery(this.deps.db, id, now));
        this.forget(id, l);
        continue;
      }
      if (l.outstanding > 0 && now - l.movedAt >= LEASE_MS) {
        this.deps.logger.info({ recovery_id: id, items: l.outstanding }, 'recovery items without an outcome for long: taken as answered');
        l.outstanding = 0;
      }
      let cur = r;
      if (r.prepared === 0) {
        this.scan(r);
        more = true;
        cur = recoveryById(this.deps.db, id) ?? r;
        if (cur.prepared === 1) for (const w of l.waiters.splice(0)) w();
      }
      // items found and not yet queued wait in recovery_items
      if (cur.fed < cur.events) {
        this.feed(cur, l);
        cur = recoveryById(this.deps.db, id) ?? cur;
      }
      if (cur.prepared === 1 && cur.fed >= cur.events && l.outstanding === 0) {
        this.deps.tx.run(() => finishRecovery(this.deps.db, id, this.deps.clock.now()));
        this.forget(id, l);
      }
    }
    return more;
  }

  private forget(id: string, l: Live): void {
    for (const w of l.waiters.splice(0)) w();
    this.live.delete(id);
  }

  /** One step of the cursor: the next SCAN_CHUNK events of the window looked at, the items found kept (one transaction). */
  private scan(r: RecoveryRow): void {
    const db = this.deps.db;
    const sub = subscriberOf(r);
    this.deps.tx.run(() => {
      // the bodies only for a filter (CONTRACT 10.2: recover uses the filter as it is now)
      const page = recoveryCandidates(db, r, SCAN_CHUNK, sub.filter !== null);
      const last = page.length < SCAN_CHUNK;
      const scanned = last ? r.to_seq : page[page.length - 1].seq;
      const delivered = r.only_failed
        ? deliveredEventIds(
            db,
            r.webhook_id,
            page.map((e) => e.event_id),
          )
        : null;
      const found: number[] = [];
      for (const e of page) {
        if (delivered?.has(e.event_id)) continue;
        const route = decodeRoute(e.route);
        if (route && sub.wants(route, e.body === undefined ? undefined : new ParsedEvent(e.body))) found.push(e.seq);
      }
      recoveryFound(db, r.recovery_id, found, scanned, last);
    });
  }

  /** Queue the recovery's next items while it has fewer than its window out (one transaction); */
  private feed(r: RecoveryRow, l: Live): void {
    const room = l.window - l.outstanding;
    if (room <= 0) return;
    const db = this.deps.db;
    let queued = 0;
    this.deps.tx.run((t) => {
      const next = nextRecoveryItems(db, r.recovery_id, room);
      let gone = 0;
      for (const { event: e } of next) {
        const route = e && decodeRoute(e.route);
        if (!e || !route) {
          gone++;
          continue;
        }
        // the registry revision when it was asked for: a data plane waits until it holds the webhook at least so new
        const itemRoute = encodeRoute({
          ...route,
          rev: r.rev,
          recovery: { id: r.recovery_id, webhook: r.webhook_id, event_id: e.event_id },
        });
        const item: QueueItem = {
          event_id: recoveryItemId(e.event_id, r.recovery_id),
          org_id: r.org_id,
          subject: eventSubject(e.subject),
          type: e.type,
          body: e.body,
          route: itemRoute,
        };
        t.enqueue(item);
        queued++;
      }
      if (next.length)
        recoveryFed(
          db,
          r.recovery_id,
          next.map((n) => n.event_seq),
          gone,
        );
    });
    if (queued) {
      l.outstanding += queued;
      l.movedAt = this.deps.clock.now();
    }
  }
}

/** The webhook as matching needs it: its subscription when the recovery was asked for (nothing else of an entry is kept with it). */
function subscriberOf(r: RecoveryRow): WebhookSubscriber {
  const s = JSON.parse(r.subscription ?? '{}') as Partial<Pick<WebhookEntry, 'interests' | 'match' | 'filter'>>;
  const entry: WebhookEntry = {
    webhook_id: r.webhook_id,
    org_id: r.org_id,
    url: '',
    secret: null,
    previous_secret: null,
    previous_secret_expires_at: null,
    interests: s.interests ?? { all_events: true },
    match: s.match ?? null,
    ...(s.filter ? { filter: s.filter } : {}),
  };
  return new WebhookSubscriber(entry);
}
