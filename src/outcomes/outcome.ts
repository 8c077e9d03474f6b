// Delivery outcomes travelling from a data plane back to the control plane, in batches (CONTRACT
// 4.1 delivery_status, 6.5 metrics). Compact on the wire: one array per outcome; the envelope
// carries the batch's id (applied once, src/outcomes/consumer.ts) and when it was sent.
//
// The outcome path, all in this folder: an attempt becomes an outcome here (outcomeOf, for the
// pipeline's attempts and the control plane's pings and resends alike) → a data plane gathers
// outcomes into batches (batching-sink.ts) → the control plane takes the batches off the bus once
// each (consumer.ts; svc serve's own data planes, in either mode, hand them over in process) →
// the status book turns them into delivery status, metrics and the attempt log (status-book.ts).
import { EXCHANGE, type AttemptResult } from '../delivery/client.ts';

/** How one delivery attempt of an event to a webhook ended. */
export interface DeliveryOutcome {
  webhook_id: string;
  org_id: string;
  event_id: string;
  /** the CloudEvents type */
  type: string;
  ok: boolean;
  status: number | null;
  error: string | null;
  duration_ms: number;
  /** when the attempt ended (ms since the epoch) */
  at: number;
  /** a recovery's id, or 'resend' (CONTRACT 4.5); absent for the automatic attempt */
  recovery_id?: string | null;
  /** the kept request and response, JSON (src/delivery/exchange-record.ts); absent when none was kept */
  exchange?: string;
}

/** Whom an attempt was for: the webhook, the event (a recovery item's: the kept event's id) and a recovery's id. */
export interface AttemptTarget {
  webhook_id: string;
  org_id: string;
  event_id: string;
  /** the CloudEvents type */
  type: string;
  /** a recovery's id, or 'resend' (CONTRACT 4.5); absent or null for the automatic attempt */
  recovery_id?: string | null;
}

/** The outcome of one attempt at `target` that ended at `at` (ms since the epoch): the one place an attempt becomes an outcome. */
export function outcomeOf(target: AttemptTarget, r: AttemptResult, at: number): DeliveryOutcome {
  const { webhook_id, org_id, event_id, type, recovery_id } = target;
  // the exchange in the literal (undefined without one): outcomes of one shape either way
  const outcome: DeliveryOutcome = {
    webhook_id,
    org_id,
    event_id,
    type,
    ok: r.delivered,
    status: r.status ?? null,
    error: r.error ?? null,
    duration_ms: r.duration_ms,
    at,
    exchange: r[EXCHANGE],
  };
  if (recovery_id) outcome.recovery_id = recovery_id;
  return outcome;
}

export interface OutcomeBatch {
  /** unique per batch, the same when the batch is sent again (its Nats-Msg-Id too): applied once */
  id: string;
  /** when the data plane sent it (ms since the epoch; set at each send, 0 before) */
  sent_at: number;
  /** the data plane that sent it (a thread of svc serve, or a svc worker) */
  worker: string;
  /** its attempts in flight when it sent the batch */
  in_flight: number;
  /** events it dropped since its previous batch, by reason */
  dropped: Record<string, number>;
  outcomes: DeliveryOutcome[];
  /**
   * the orgs whose deliveries queue there (every attempt of theirs started since its previous batch
   * waited a while first: src/dataplane/pipeline.ts backlogReport); absent when none
   */
  backlogged?: string[];
  /** the orgs of an earlier batch's `backlogged` whose deliveries no longer queue there; absent when none */
  caught_up?: string[];
}

/** What a data plane tells of its orgs' queues with a batch (src/dataplane/pipeline.ts backlogReport). */
export interface BacklogReport {
  backlogged: string[];
  caughtUp: string[];
}

/**
 * 9 fields, a 10th (the recovery id, null without one) when there is one or an 11th follows, and an
 * 11th (the kept exchange's JSON) when there is one: older 9- and 10-field tuples still decode.
 */
type WireOutcome = [string, string, string, string, 0 | 1, number | null, string | null, number, number, (string | null)?, string?];

export function encodeOutcomeBatch(b: OutcomeBatch): string {
  const outcomes: WireOutcome[] = b.outcomes.map((o) => {
    const t: WireOutcome = [o.webhook_id, o.org_id, o.event_id, o.type, o.ok ? 1 : 0, o.status, o.error, o.duration_ms, o.at];
    if (o.recovery_id || o.exchange) t.push(o.recovery_id || null);
    if (o.exchange) t.push(o.exchange);
    return t;
  });
  return JSON.stringify({
    i: b.id,
    t: b.sent_at,
    w: b.worker,
    f: b.in_flight,
    d: b.dropped,
    o: outcomes,
    ...(b.backlogged?.length ? { b: b.backlogged } : {}),
    ...(b.caught_up?.length ? { c: b.caught_up } : {}),
  });
}

export function decodeOutcomeBatch(text: string): OutcomeBatch | null {
  try {
    const v = JSON.parse(text) as { i: unknown; t: unknown; w: unknown; f: unknown; d: unknown; o: unknown; b?: unknown; c?: unknown };
    if (
      typeof v.i !== 'string' ||
      !v.i ||
      typeof v.t !== 'number' ||
      typeof v.w !== 'string' ||
      typeof v.f !== 'number' ||
      !Array.isArray(v.o) ||
      typeof v.d !== 'object' ||
      v.d === null
    )
      return null;
    const outcomes: DeliveryOutcome[] = [];
    for (const x of v.o as unknown[]) {
      if (!Array.isArray(x) || x.length < 9 || x.length > 11) return null;
      const [webhook_id, org_id, event_id, type, ok, status, error, duration_ms, at, recovery_id, exchange] = x as WireOutcome;
      if (recovery_id !== undefined && recovery_id !== null && typeof recovery_id !== 'string') return null;
      if (exchange !== undefined && typeof exchange !== 'string') return null;
      if (typeof webhook_id !== 'string' || typeof org_id !== 'string' || typeof event_id !== 'string' || typeof type !== 'string')
        return null;
      if (typeof duration_ms !== 'number' || typeof at !== 'number') return null;
      // every field named, recovery_id too (undefined without one): outcomes of one shape (no spread)
      outcomes.push({
        webhook_id,
        org_id,
        event_id,
        type,
        ok: ok === 1,
        status: typeof status === 'number' ? status : null,
        error: typeof error === 'string' ? error : null,
        duration_ms,
        at,
        recovery_id: recovery_id || undefined,
        exchange: exchange || undefined,
      });
    }
    const dropped: Record<string, number> = {};
    for (const [k, n] of Object.entries(v.d as Record<string, unknown>)) if (typeof n === 'number' && n > 0) dropped[k] = n;
    // `b` and `c` came later (an older data plane sends neither); only their org ids are taken
    const backlogged = orgIds(v.b);
    const caughtUp = orgIds(v.c);
    return {
      id: v.i,
      sent_at: v.t,
      worker: v.w,
      in_flight: v.f,
      dropped,
      outcomes,
      ...(backlogged.length ? { backlogged } : {}),
      ...(caughtUp.length ? { caught_up: caughtUp } : {}),
    };
  } catch {
    return null;
  }
}

function orgIds(v: unknown): string[] {
  return Array.isArray(v) ? v.filter((org): org is string => typeof org === 'string') : [];
}
