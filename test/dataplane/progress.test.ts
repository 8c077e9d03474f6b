// Progress records (KV svc_progress) are sealed with the data plane key (CONTRACT 6.7): a record
// written by someone else on the bus (marking webhooks done, or the event settled) is ignored.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { Kvm, type KV } from '@nats-io/kv';
import { ensureLayout, PROGRESS_BUCKET } from '../../src/bus/nats/jetstream.ts';
import { newDataplaneKey, Seal } from '../../src/bus/seal.ts';
import { ManualClock } from '../helpers/clock.ts';
import type { JsMsg } from '@nats-io/jetstream';
import { KvProgress, type HeldBatch } from '../../src/dataplane/sources/jetstream/progress.ts';
import type { InboundEvent } from '../../src/dataplane/pipeline.ts';
import { findNatsServer, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.ts';

const eventOf = (id: string) => ({ id }) as InboundEvent;
/** A batch held by a plane (its message is not needed to record its progress). */
const batchOf = (id: string, ids: string[]): HeldBatch => ({
  id,
  m: {} as JsMsg,
  done: new Map(),
  finished: new Set(),
  ids,
  left: ids.length,
  released: false,
});

describe.skipIf(findNatsServer() === null)('sealed progress records', () => {
  let nats: NatsServerHandle;
  let nc: NatsConnection;
  let kv: KV;
  const seal = new Seal(newDataplaneKey());

  beforeAll(async () => {
    nats = await startNatsServer();
    nc = await connect({ servers: nats.url });
    await ensureLayout(nc, await jetstreamManager(nc));
    kv = await new Kvm(jetstream(nc)).open(PROGRESS_BUCKET);
  });
  afterAll(async () => {
    await nc?.close();
    await nats?.stop();
  });

  it("a data plane's own record reads back; one written by anyone else (plain, another key, or another event's) is ignored", async () => {
    const refused: string[] = [];
    const progress = new KvProgress(kv, seal, (id) => refused.push(id));
    const mine = randomUUID();
    const [e1, e2, e3] = [randomUUID(), randomUUID(), randomUUID()];
    const held = batchOf(mine, [e1, e2, e3]);
    progress.track(held);
    held.finished.add(e3);
    await progress.save([{ event: eventOf(e1), done: ['wh_1', 'wh_2'] }]);
    // one record for the batch: what each unfinished event had, and which events were settled
    expect(await progress.load(mine)).toEqual({ done: { [e1]: ['wh_1', 'wh_2'] }, finished: [e3] });
    await progress.save([{ event: eventOf(e2), done: ['wh_1'] }]);
    expect(await progress.load(mine)).toEqual({ done: { [e1]: ['wh_1', 'wh_2'], [e2]: ['wh_1'] }, finished: [e3] });

    // written in the clear, as before records were sealed: "every webhook done", "settled elsewhere"
    const plain = randomUUID();
    await kv.put(plain, JSON.stringify({ done: ['wh_1'], settled: true }));
    expect(await progress.load(plain)).toBeNull();
    // sealed with another key
    const other = randomUUID();
    await kv.put(other, new Seal(newDataplaneKey()).sealRecord(other, JSON.stringify({ done: {}, finished: [], settled: true })));
    expect(await progress.load(other)).toBeNull();
    // a genuine record copied onto another event
    const copied = randomUUID();
    await kv.put(copied, (await kv.get(mine))!.string());
    expect(await progress.load(copied)).toBeNull();
    expect(refused).toEqual([plain, other, copied]);

    // the records a plane writes after a reconnect are sealed too
    const settled = randomUUID();
    const clock = new ManualClock();
    expect(
      await progress.mark(
        [{ id: settled, rec: { done: {}, finished: [], holder: 'plane_a', at: clock.now(), settled: true } }],
        clock,
        clock.now() + 1000,
        () => false,
      ),
    ).toBe(0);
    expect(await new KvProgress(kv, seal).load(settled)).toEqual({
      done: {},
      finished: [],
      holder: 'plane_a',
      at: clock.now(),
      settled: true,
    });
  });
});
