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
import { ensureLayout, EVENTS_STREAM } from '../../src/bus/nats/jetstream.ts';
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
