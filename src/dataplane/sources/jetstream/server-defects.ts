// Guards against nats-server defects, each named after its upstream issue, so that it can go when the
// oldest nats-server svc supports has the fix. Debian's nats-server 2.9.10 has all of them.
//
// nats-server#5305 and #5338 (fixed upstream in April 2024): when the server picks an event to
// redeliver (after a nak) while the only pull requests it has are dead ones (their client
// unsubscribed), it steps the consumer back by one and later hands out the last event it delivered
// once more, as a new delivery (delivery count 1), usually to the same data plane. Two guards:
//  - releaseDelayMs5305: batches released at a drain are nak'd with a delay that outlives this
//    plane's own pull request (the dead one a drain leaves behind);
//  - keepCopy5305: a second copy of a batch this plane already holds is not attempted again: it is
//    kept with the first and settled (acked) with it (./source.ts finish()).
//
// A pull request that expires as an event arrives is dropped without the 408 that ends it (same
// server; no upstream issue found, so the guard is named after the behaviour: endPullWithout408). The
// client's fetch would wait for two missed heartbeats (2 s more, nothing pulled meanwhile: every org's
// events late by up to 3 s); a pull request not ended PULL_GRACE_MS after it expired is ended here,
// and the next pull goes out at once.
import type { Logger } from 'pino';
import type { JsMsg } from '@nats-io/jetstream';
import type { Clock, Timer } from '../../../domain/clock.ts';

/**
 * nats-server#5305/#5338: how much later batches released at a drain (or handed out while stopping)
 * come back: once this plane's last pull request (`pullExpiresMs` long) has expired.
 */
export const releaseDelayMs5305 = (pullExpiresMs: number): number => pullExpiresMs + 1000;

/**
 * nats-server#5305/#5338: JetStream handed out a batch this plane already holds (the same batch again,
 * not a new one): kept as a copy of it (settled with it), not attempted twice.
 */
export function keepCopy5305(held: { copies: JsMsg[] }, id: string, m: JsMsg, logger: Logger): void {
  logger.warn(
    { batch_id: id, stream_seq: m.seq, deliveries: m.info.deliveryCount },
    'JetStream handed out a batch of events this data plane already holds; it is not attempted twice',
  );
  held.copies.push(m);
}

/** A pull request not ended by the server this long after it expired is ended here (endPullWithout408). */
export const PULL_GRACE_MS = 150;

/**
 * nats-server 2.9 may let an expired pull request go without a word (no 408): the client would learn
 * it only from missed heartbeats, seconds later, pulling nothing meanwhile. So the pull is ended
 * PULL_GRACE_MS after it expired (`overdue` says so); cancel the timer once the pull has ended.
 */
export function endPullWithout408(clock: Clock, pull: { stop(): void }, expiresMs: number, overdue: () => void): Timer {
  return clock.setTimeout(() => {
    overdue();
    pull.stop();
  }, expiresMs + PULL_GRACE_MS);
}
