// NATS mode: outcome batches from every data plane (stream SVC_OUTCOMES, durable consumer
// svc-engine) into the delivery status book. A batch not sealed with the data plane key is dropped.
import type { Logger } from 'pino';
import type { JetStreamClient } from '@nats-io/jetstream';
import { decodeOutcomeBatch, type OutcomeBatch } from '../domain/outcomes.ts';
import { OUTCOMES_CONSUMER, OUTCOMES_STREAM, SEAL_HEADER } from '../bus/jetstream.ts';
import type { Seal } from '../bus/seal.ts';

export async function consumeOutcomes(
  js: JetStreamClient,
  seal: Seal,
  apply: (batch: OutcomeBatch) => void,
  logger: Logger,
): Promise<{ stop(): Promise<void> }> {
  const consumer = await js.consumers.get(OUTCOMES_STREAM, OUTCOMES_CONSUMER);
  const messages = await consumer.consume({ max_messages: 64 });
  const text = new TextDecoder();
  const loop = (async () => {
    for await (const m of messages) {
      const body = text.decode(m.data);
      const s = m.headers?.get(SEAL_HEADER) ?? '';
      const batch = s && seal.opensBatch(m.data, s) ? decodeOutcomeBatch(body) : null;
      if (!batch) {
        logger.warn({ subject: m.subject }, 'an outcome batch not sealed by a data plane; dropped');
        m.term();
        continue;
      }
      apply(batch);
      m.ack();
    }
  })().catch((err: unknown) => logger.warn({ err: String(err) }, 'outcome consumer stopped'));
  return {
    async stop() {
      await messages.close().catch(() => undefined);
      await loop;
    },
  };
}
