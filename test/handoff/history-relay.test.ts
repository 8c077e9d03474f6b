// NATS mode with a history (src/handoff/relay-queues.ts): an emitted event's history row is its
// queue row. The engine's commit writes no outbox row for it; the history's relay publishes it to a
// real nats-server in one message per batch, moves relay_cursor on once JetStream has stored it, and
// after a restart publishes what was committed and not stored (a crash before the publish), and
// nothing that was.
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pino from 'pino';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { openDb, type Db } from '../../store/db.ts';
import { outboxSize } from '../../store/outbox.ts';
import { readQueuedEvents, relayCursor } from '../../store/history.ts';
import { ensureLayout, EVENTS_STREAM } from '../../src/bus/nats/jetstream.ts';
import { JetStreamPublisher } from '../../src/bus/nats/jetstream-publisher.ts';
import { createMemoryBus } from '../../src/bus/memory.ts';
import { newDataplaneKey, Seal } from '../../src/bus/seal.ts';
import { decodeHopBatch } from '../../src/bus/hop.ts';
import { Engine } from '../../src/engine/engine.ts';
import { OutboxRelay } from '../../src/handoff/outbox-relay.ts';
import { historyQueue } from '../../src/handoff/relay-queues.ts';
import { relayEventQueue } from '../../src/handoff/relay-event-queue.ts';
import { parseIngest } from '../../src/ingest/ingest.ts';
import { createMetrics } from '../../src/metrics.ts';
import { createOrg } from '../../store/orgs.ts';
import { ManualClock } from '../helpers/clock.ts';
import { findNatsServer, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.ts';
import { tmpDir, waitFor } from '../helpers/service.ts';

const logger = pino({ level: 'silent' });

describe.skipIf(findNatsServer() === null)('the history as the queue (NATS mode)', () => {
  let nats: NatsServerHandle;
  let nc: NatsConnection;
  let jsm: JetStreamManager;

  beforeAll(async () => {
    nats = await startNatsServer();
    nc = await connect({ servers: nats.url, name: 'history-relay-test' });
    jsm = await jetstreamManager(nc);
    await ensureLayout(nc, jsm, { replicas: 1 });
  });
  afterAll(async () => {
    await nc?.close();
    await nats?.stop();
  });

  /** The events in SVC_EVENTS, message by message. */
  async function stored(): Promise<string[][]> {
    const info = await jsm.streams.info(EVENTS_STREAM);
    const out: string[][] = [];
    for (let seq = info.state.first_seq; info.state.messages > 0 && seq <= info.state.last_seq; seq++) {
      const m = await jsm.streams.getMessage(EVENTS_STREAM, { seq }).catch(() => null);
      if (m) out.push((decodeHopBatch(m.data) ?? []).map((e) => e.id));
    }
    return out;
  }

  it('events committed in their history row only, published as one batch, the cursor moved on; a restart publishes only what was not stored', async () => {
    await jsm.streams.purge(EVENTS_STREAM);
    const db: Db = openDb(path.join(tmpDir('svc-hrelay-'), 'svc.db'));
    const orgId = createOrg(db, 'history-relay').org.org_id;
    const clock = new ManualClock();
    const seal = new Seal(newDataplaneKey());
    const publisher = new JetStreamPublisher(nc, '_INBOX_hrelay_test', 2000);
    const open = () => new OutboxRelay(db, publisher, seal, logger, null, clock, null, historyQueue(db));
    let relay = open();
    // the outbox's relay: nothing is queued there (every event is kept), and it never publishes
    const outboxRelay = new OutboxRelay(db, publisher, seal, logger, null, clock, null);
    let engine: Engine | null = null;
    try {
      // wired as src/topology/nats.ts wires it; `publish` false: the commits are not handed over
      const engineFor = (r: OutboxRelay, publish = true) =>
        new Engine({
          db,
          bus: createMemoryBus({ logger }),
          clock,
          logger,
          metrics: createMetrics({ defaultMetrics: false }),
          urls: () => ({ base: 'http://svc', source: '//svc', dashboard: 'http://svc/dashboard' }),
          registryRev: () => 1,
          queue: relayEventQueue(db, outboxRelay, r, () => publish),
        });
      engine = engineFor(relay);
      const fact = (n: number) => {
        const workflow = { id: `wfx_${n}`, type: 'manual_deploy', owner_id: 'inst_ext', owner_type: 'installs' };
        return parseIngest(
          `svc.ingest.${orgId}.workflows.wfx_${n}`,
          Buffer.from(JSON.stringify({ kind: 'workflow', transition: 'started', workflow })),
        );
      };
      // three facts in one group commit: three history rows, no outbox row, one batch
      const results = engine.ingest([fact(1), fact(2), fact(3)]);
      expect(results.every((r) => r.ok)).toBe(true);
      expect(outboxSize(db)).toBe(0);
      const queued = readQueuedEvents(db, 0, 10);
      expect(queued).toHaveLength(3);
      expect(new Set(queued.map((r) => r.batch)).size).toBe(1);
      await waitFor(async () => (await stored()).length === 1, 5000, 'the batch published');
      expect(await stored()).toEqual([queued.map((r) => r.event_id)]);
      expect(relay.idle()).toBe(false); // stored, the cursor not moved yet
      clock.advance(25); // no commit came to take the cursor along: it moves on its own
      await waitFor(() => relayCursor(db) === queued[2].seq, 5000, 'the cursor past the stored batch');
      expect(relay.idle()).toBe(true);
      expect(readQueuedEvents(db, 0, 10)).toHaveLength(3); // the history keeps them

      // a commit the relay does not publish (as if killed before the publish): only in the table
      engine.close();
      await relay.close();
      engine = engineFor(relay, false);
      engine.ingest([fact(4)]);
      const fourth = readQueuedEvents(db, relayCursor(db), 10);
      expect(fourth.map((r) => r.batch)).toEqual([fourth[0].event_id]);

      // the next start: the relay reads the table after the cursor, publishes the fourth alone
      relay = open();
      expect(relay.idle()).toBe(false);
      relay.kick();
      await waitFor(async () => (await stored()).length === 2, 5000, 'the fourth published from the table');
      expect(await stored()).toEqual([queued.map((r) => r.event_id), [fourth[0].event_id]]);
      clock.advance(25);
      await waitFor(() => relayCursor(db) === fourth[0].seq, 5000, 'the cursor past the fourth');
      await waitFor(() => relay.idle(), 5000, 'caught up with the table');
      expect(relay.unstoredFrom()).toBe(fourth[0].seq + 1);
    } finally {
      engine?.close();
      await relay.close();
      publisher.close();
      db.close();
    }
  });
});
