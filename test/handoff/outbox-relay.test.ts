// The outbox relay (src/handoff/outbox-relay.ts) against a real nats-server: observers' copies on
// svc.events.… go out with a batch's publish, once per event, even when that publish fails and is
// made again (here: no stream to store it until the layout is made).
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pino from 'pino';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { openDb, type Db } from '../../store/db.ts';
import { insertOutbox, readOutbox, type OutboxRow } from '../../store/outbox.ts';
import { ensureLayout, EVENTS_STREAM, ORDERED_PARTITIONS, ORDERED_STREAM } from '../../src/bus/nats/jetstream.ts';
import { decodeHopMessage, orderedPartition } from '../../src/bus/hop.ts';
import { encodeRoute, type EventRoute } from '../../src/domain/event-route.ts';
import { insertWebhook } from '../../store/webhooks.ts';
import { allEventsEntry } from '../helpers/webhooks.ts';
import { JetStreamPublisher } from '../../src/bus/nats/jetstream-publisher.ts';
import { newDataplaneKey, Seal } from '../../src/bus/seal.ts';
import { OutboxRelay } from '../../src/handoff/outbox-relay.ts';
import { ManualClock } from '../helpers/clock.ts';
import { findNatsServer, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.ts';
import { tmpDir, waitFor } from '../helpers/service.ts';

describe.skipIf(findNatsServer() === null)('outbox relay: observers', () => {
  let nats: NatsServerHandle;
  let nc: NatsConnection;
  let db: Db;

  beforeAll(async () => {
    nats = await startNatsServer();
    nc = await connect({ servers: nats.url, name: 'relay-test' });
    db = openDb(path.join(tmpDir('svc-relay-'), 'svc.db'));
  });
  afterAll(async () => {
    db?.close();
    await nc?.close();
    await nats?.stop();
  });

  it('each event is mirrored once as its batch is published, though the publish fails and is made again', async () => {
    const clock = new ManualClock();
    const publisher = new JetStreamPublisher(nc, '_INBOX_relay_test', 500);
    const relay = new OutboxRelay(db, publisher, new Seal(newDataplaneKey()), pino({ level: 'silent' }), null, clock);
    const observed: string[] = [];
    const sub = nc.subscribe('svc.events.>', { callback: (_e, m) => void observed.push(m.subject) });
    try {
      const rows: OutboxRow[] = [];
      for (let i = 1; i <= 3; i++) {
        const item = {
          event_id: `ev_${i}`,
          org_id: 'org_1',
          subject: `svc.events.org_1.workflow.wf_${i}.started`,
          type: 't',
          body: `{"n":${i}}`,
          route: '{"org":"org_1"}',
        };
        const batch = relay.assign(item.event_id, item.body.length + item.route.length);
        rows.push({ ...item, batch, seq: insertOutbox(db, item, batch), progress: [] });
      }
      relay.handoff(rows);
      // no SVC_EVENTS stream yet: the publish is refused, the rows wait in the outbox
      await waitFor(() => observed.length === 3, 5000, 'mirrored as the batch is published');
      await nc.flush();
      expect(readOutbox(db, 0, 10).map((r) => r.event_id)).toEqual(['ev_1', 'ev_2', 'ev_3']);

      await ensureLayout(nc, await jetstreamManager(nc), { replicas: 1 });
      clock.advance(1000); // the relay's retry: it reads the table again and publishes
      await waitFor(async () => (await (await jetstreamManager(nc)).streams.info(EVENTS_STREAM)).state.messages === 1, 5000, 'stored once');
      clock.advance(25); // the stored rows are deleted on their own when no commit takes them along
      await waitFor(() => readOutbox(db, 0, 10).length === 0, 5000, 'stored rows deleted');
      await nc.flush();
      expect(observed).toEqual([
        'svc.events.org_1.workflow.wf_1.started',
        'svc.events.org_1.workflow.wf_2.started',
        'svc.events.org_1.workflow.wf_3.started',
      ]);
    } finally {
      sub.unsubscribe();
      await relay.close();
      publisher.close();
    }
  });
});

describe.skipIf(findNatsServer() === null)('outbox relay: ordered webhooks (CONTRACT 10.1)', () => {
  let nats: NatsServerHandle;
  let nc: NatsConnection;
  let db: Db;

  beforeAll(async () => {
    nats = await startNatsServer();
    nc = await connect({ servers: nats.url, name: 'relay-ordered-test' });
    db = openDb(path.join(tmpDir('svc-relay-'), 'svc.db'));
    await ensureLayout(nc, await jetstreamManager(nc));
  });
  afterAll(async () => {
    db?.close();
    await nc?.close();
    await nats?.stop();
  });

  it("an org with per_key webhooks: its hop batch names them, each keyed event goes alone on its key's partition, in order", async () => {
    db.prepare('INSERT OR IGNORE INTO orgs (org_id, name, created_at) VALUES (?, ?, ?)').run('org_1', 'org_1', new Date().toISOString());
    insertWebhook(db, { ...allEventsEntry('org_1', 'wh_ord', 'http://o.test/'), match_canonical: '', delivery: { ordering: 'per_key' } });
    insertWebhook(db, { ...allEventsEntry('org_1', 'wh_plain', 'http://p.test/'), match_canonical: '' });
    const relay = new OutboxRelay(
      db,
      new JetStreamPublisher(nc, '_INBOX_relay_ord', 5000),
      new Seal(newDataplaneKey()),
      pino({ level: 'silent' }),
    );
    const keys = ['inst_a', 'inst_b', 'inst_a', 'inst_c', 'inst_a', 'inst_b'];
    const rows: OutboxRow[] = [];
    for (const [i, key] of keys.entries()) {
      const route: EventRoute = {
        org: 'org_1',
        type: 't',
        resource: 'installs',
        op: 'x',
        event: 'e',
        install: null,
        component: null,
        action: null,
        rev: 0,
        key,
      };
      const item = {
        event_id: `ev_${i}`,
        org_id: 'org_1',
        subject: `svc.events.org_1.x.${i}`,
        type: 't',
        body: `{"n":${i}}`,
        route: encodeRoute(route),
      };
      const batch = relay.assign(item.event_id, item.body.length + item.route.length);
      rows.push({ ...item, batch, seq: insertOutbox(db, item, batch), progress: [] });
    }
    relay.handoff(rows);
    const jsm = await jetstreamManager(nc);
    await waitFor(async () => (await jsm.streams.info(ORDERED_STREAM)).state.messages === keys.length, 5000, 'the ordered copies stored');
    const hop = decodeHopMessage((await jsm.streams.getMessage(EVENTS_STREAM, { seq: 1 }))!.data)!;
    expect(hop.ordered).toEqual(['wh_ord']);
    expect(hop.events.map((e) => e.id)).toEqual(keys.map((_, i) => `ev_${i}`));
    // per partition, in commit order, each message one event with `k`
    const byPartition = new Map<string, string[]>();
    for (let seq = 1; seq <= keys.length; seq++) {
      const m = (await jsm.streams.getMessage(ORDERED_STREAM, { seq }))!;
      const copy = decodeHopMessage(m.data)!;
      expect(copy.ordered).toEqual(['wh_ord']);
      expect(copy.events).toHaveLength(1);
      expect(m.header.get('Nats-Msg-Id')).toBe(`${copy.events[0].id}.o`);
      byPartition.set(m.subject, [...(byPartition.get(m.subject) ?? []), copy.events[0].id]);
    }
    const a = `svc.ordered.${orderedPartition('org_1', 'inst_a', ORDERED_PARTITIONS)}`;
    expect(byPartition.get(a)!.filter((id) => ['ev_0', 'ev_2', 'ev_4'].includes(id))).toEqual(['ev_0', 'ev_2', 'ev_4']);
    await relay.close();
  });
});
