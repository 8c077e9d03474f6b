// A pull request the server never ends (issue 27): nats-server 2.9.10 drops a pull request that
// expires as a message arrives without a word (no 408 status), so the client's fetch would end only
// when two heartbeats are missed, 2 s later, and nothing is pulled meanwhile (measured on a real
// server: 1 fetch in about 90 with a message published at its expiry took 4 s). The source ends such a
// request itself shortly after it expired and pulls again. The NATS consumer here is a stand-in
// whose fetch never ends by itself, and the clock is a manual one: nothing waits on time.
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import type { Consumer, JetStreamClient } from '@nats-io/jetstream';
import { newDataplaneKey, Seal } from '../../src/bus/seal.ts';
import { WebhookRegistry } from '../../src/dispatch/registry.ts';
import type { Deliverer } from '../../src/delivery/client.ts';
import { DeliveryPipeline } from '../../src/dataplane/pipeline.ts';
import { JetStreamSource } from '../../src/dataplane/sources/jetstream/source.ts';
import type { KvProgress } from '../../src/dataplane/sources/jetstream/progress.ts';
import { ManualClock } from '../helpers/clock.ts';

/** A fetch that yields nothing and ends only when stopped, as a pull request the server let go of. */
function silentFetch() {
  let end!: () => void;
  const ended = new Promise<void>((r) => (end = r));
  let stopped = false;
  return {
    get stopped() {
      return stopped;
    },
    stop() {
      stopped = true;
      end();
    },
    // biome-ignore lint/correctness/useYield: an iterator that ends without yielding, as a stopped consumer does
    async *[Symbol.asyncIterator]() {
      await ended;
    },
  };
}

describe('a pull request the server does not end', () => {
  it('is ended by the source 150 ms after it expired (2 s), and the source pulls again at once', async () => {
    const clock = new ManualClock();
    const fetches: Array<ReturnType<typeof silentFetch>> = [];
    const consumer = {
      fetch: async () => {
        const f = silentFetch();
        fetches.push(f);
        return f;
      },
    } as unknown as Consumer;
    const js = { consumers: { get: async () => consumer } } as unknown as JetStreamClient;
    const logger = pino({ level: 'silent' });
    const pipeline = new DeliveryPipeline({
      registry: new WebhookRegistry(),
      deliverer: { send: () => {}, hostOf: () => 'host' } as unknown as Deliverer,
      sign: () => ({}),
      outcomes: { record: () => {}, flush: async () => {} },
      progress: null,
      clock,
      logger,
      concurrency: 16,
    });
    const source = new JetStreamSource({
      js,
      workerId: 'plane_test',
      seal: new Seal(newDataplaneKey()),
      pipeline,
      // never reached: no batch is handed out
      progress: {} as KvProgress,
      clock,
      logger,
      dropped: () => {},
    });
    await source.start();
    const settle = () => new Promise((r) => setImmediate(r));
    expect(fetches).toHaveLength(1);

    clock.advance(2149);
    await settle();
    expect(fetches[0].stopped).toBe(false);
    expect(fetches).toHaveLength(1);

    clock.advance(1);
    await settle();
    expect(fetches[0].stopped).toBe(true);
    expect(fetches).toHaveLength(2);
    expect(source.overdue).toBe(1);

    // the next one too, counted from its own start
    clock.advance(2150);
    await settle();
    expect(fetches).toHaveLength(3);
    expect(source.overdue).toBe(2);

    await source.stop();
    expect(fetches[2].stopped).toBe(true);
  });
});
