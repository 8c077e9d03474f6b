// A delivery pipeline for tests of the data plane (src/dataplane/pipeline.ts), over a deliverer
// that holds each attempt until the test answers it: attempts are signed with their event's id as
// webhook-id and nothing else, outcomes are not kept, there is no progress store.
import pino from 'pino';
import type { AttemptCallback, Deliverer } from '../../src/delivery/client.ts';
import type { WebhookRegistry } from '../../src/dispatch/registry.ts';
import type { Clock } from '../../src/domain/clock.ts';
import { DeliveryPipeline, type PipelineOptions } from '../../src/dataplane/pipeline.ts';

export interface HeldPipeline {
  pipeline: DeliveryPipeline;
  /** the attempts not yet answered, oldest first */
  open: AttemptCallback[];
}

/** `sent`: told each attempt's event id (its webhook-id) as it is sent. */
export function heldPipeline(
  o: { registry: WebhookRegistry; clock: Clock; sent: (eventId: string) => void } & Partial<PipelineOptions>,
): HeldPipeline {
  const { sent, ...options } = o;
  const open: AttemptCallback[] = [];
  const deliverer = {
    send: (_url: string, headers: Record<string, string>, _b: Buffer, done: AttemptCallback) => {
      sent(headers['webhook-id']);
      open.push(done);
    },
    hostOf: () => 'host',
  } as unknown as Deliverer;
  const pipeline = new DeliveryPipeline({
    deliverer,
    sign: (_sub, eventId) => ({ 'webhook-id': eventId }),
    outcomes: { record: () => {}, flush: async () => {} },
    progress: null,
    logger: pino({ level: 'silent' }),
    concurrency: 16,
    ...options,
  });
  return { pipeline, open };
}
