// src/bus/nats/nats-connection.ts connectNats: the options every svc connection is made with reach the
// client, the one that its types hide included (a nats.js upgrade that drops it fails here).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectNats, PENDING_LIMIT } from '../../src/bus/nats/nats-connection.ts';
import { startNatsServer, type NatsServerHandle } from '../helpers/nats-server.ts';

let nats: NatsServerHandle;
beforeAll(async () => {
  nats = await startNatsServer();
});
afterAll(async () => {
  await nats?.stop();
});

describe('connectNats', () => {
  it(
    'writes in the middle of a burst only past PENDING_LIMIT (256 KiB, not 32): ' + 'what a turn publishes arrives whole and in order',
    async () => {
      const nc = await connectNats(nats.url);
      const sub = await connectNats(nats.url);
      try {
        const protocol = (nc as unknown as { protocol: { pendingLimit: number } }).protocol;
        expect(PENDING_LIMIT).toBe(256 * 1024);
        expect(protocol.pendingLimit).toBe(PENDING_LIMIT);
        // one turn publishes 600 KiB: past the limit twice, the rest at the end of the turn
        const got: number[] = [];
        let all!: () => void;
        const arrived = new Promise<void>((resolve) => (all = resolve));
        const s = sub.subscribe('svc.test.burst', {
          callback: (_e, m) => {
            if (got.push(m.data.length) === 600) all();
          },
        });
        await sub.flush();
        for (let i = 0; i < 600; i++) nc.publish('svc.test.burst', new Uint8Array(1024 + i));
        await nc.flush();
        await arrived;
        s.unsubscribe();
        expect(got).toEqual(Array.from({ length: 600 }, (_, i) => 1024 + i));
      } finally {
        await nc.close();
        await sub.close();
      }
    },
  );
});
