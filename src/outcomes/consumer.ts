// NATS mode: outcome batches from every svc worker's data plane (stream SVC_OUTCOMES, durable
// consumer svc-engine; svc serve's own delivery threads hand theirs over in process) into the
// delivery status book, each applied once (CONTRACT 6.7):
//  - a batch not sealed with the data plane key is dropped (a client on the bus cannot mark
//    attempts or inflate counters);
//  - a batch's id is its Nats-Msg-Id: a copy published again within the stream's duplicate
//    window is a JetStream duplicate, and one published under another msg id (or none) is refused;
//  - a batch stored more than REPLAY_WINDOW_MS after it was sent (sealed) is a replay: refused;
//  - within that window, the ids applied are remembered here (a nats-server restart forgets its
//    duplicate tracking of acked messages).
import type { Logger } from 'pino';
import type { JetStreamClient } from '@nats-io/jetstream';
import { systemClock, type Clock } from '../domain/clock.ts';
import { decodeOutcomeBatch, type OutcomeBatch } from './outcome.ts';
import { EVENT_ID_HEADER, OUTCOMES_CONSUMER, OUTCOMES_STREAM, REPLAY_WINDOW_MS, SEAL_HEADER, storedAtMs } from '../bus/nats/jetstream.ts';
import type { Seal } from '../bus/seal.ts';
import { RepeatedWarnings } from '../log-summary.ts';

export type BatchVerdict = 'apply' | 'forged' | 'replayed';

/** What to do with one outcome batch message: the checks above, and the ids applied lately. */
export class OutcomeBatchGate {
  /** batch ids applied, oldest first, and when (the clock's ms) */
  private readonly applied = new Map<string, number>();

  constructor(
    private readonly seal: Seal,
    private readonly clock: Clock = systemClock,
    private readonly windowMs = REPLAY_WINDOW_MS,
  ) {}

  /** The batch to apply, or why not. `storedAt`: when JetStream stored the message (ms). */
  check(
    body: Uint8Array,
    sealText: string,
    msgId: string,
    storedAt: number,
  ): { verdict: 'apply'; batch: OutcomeBatch } | { verdict: Exclude<BatchVerdict, 'apply'> } {
    const batch = sealText && this.seal.opensBatch(body, sealText) ? decodeOutcomeBatch(new TextDecoder().decode(body)) : null;
    if (!batch) return { verdict: 'forged' };
    if (batch.id !== msgId || storedAt - batch.sent_at > this.windowMs) return { verdict: 'replayed' };
    this.forget();
    if (this.applied.has(batch.id)) return { verdict: 'replayed' };
    this.applied.set(batch.id, this.clock.now());
    return { verdict: 'apply', batch };
  }

  /** Ids older than the window and the clock difference it covers cannot come back: forgotten. */
  private forget(): void {
    const before = this.clock.now() - 2 * this.windowMs;
    for (const [id, at] of this.applied) {
      if (at >= before) break;
      this.applied.delete(id);
    }
  }
}

const OUTCOME_PULL_EXPIRES_MS = 5000;

export async function consumeOutcomes(
  js: JetStreamClient,
  seal: Seal,
  apply: (batch: OutcomeBatch) => void,
  logger: Logger,
  opts: { clock?: Clock; replayWindowMs?: number } = {},
): Promise<{ stop(): Promise<void> }> {
  const consumer = await js.consumers.get(OUTCOMES_STREAM, OUTCOMES_CONSUMER);
  // pull requests that live 5 s (heartbeats every 2.5 s), not nats.js's 30 s: one the server lost
  // (its consumer's leader died, a NATS cluster electing another; or nats-server 2.9 dropped it as
  // it expired, see the header of src/dataplane/sources/jetstream/server-defects.ts) is known lost and
  // pulled again within about 5 s, not 30 s, and the delivery status follows the outcomes that soon
  const messages = await consumer.consume({ max_messages: 64, expires: OUTCOME_PULL_EXPIRES_MS });
  const gate = new OutcomeBatchGate(seal, opts.clock, opts.replayWindowMs);
  const refused = new RepeatedWarnings(
    logger,
    opts.clock ?? systemClock,
    'an outcome batch refused (forged: not sealed by a data plane; replayed: applied already, or sent long ago)',
  );
  const loop = (async () => {
    for await (const m of messages) {
      const r = gate.check(m.data, m.headers?.get(SEAL_HEADER) ?? '', m.headers?.get(EVENT_ID_HEADER) ?? '', storedAtMs(m));
      if (r.verdict !== 'apply') {
        refused.warn({ reason: r.verdict, subject: m.subject });
        m.term();
        continue;
      }
      apply(r.batch);
      m.ack();
    }
  })().catch((err: unknown) => logger.warn({ err }, 'outcome consumer stopped'));
  return {
    async stop() {
      await messages.close().catch(() => undefined);
      await loop;
      refused.close();
    },
  };
}
