// One message per org on the durable hop (src/handoff/outbox-relay.ts, CONTRACT 8): facts of three
// orgs committed together share batches, and each batch is published as one message per org, so a
// data plane can leave one org's events in JetStream (its share of the window is full) and take
// another's. Every event is in exactly one message; a message of a batch that held several orgs is
// named `<batch>.<org>`.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { decodeHopBatch } from '../../src/bus/hop.ts';
import { EVENTS_STREAM } from '../../src/bus/nats/jetstream.ts';
import { decodeRoute } from '../../src/domain/event-route.ts';
import { findNatsServer, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.ts';
import { startService, waitFor, type OrgCreds, type TestService } from '../helpers/service.ts';
import { rid } from '../helpers/ids.ts';
import { ingestRequest } from '../helpers/producer.ts';
import { eventsStored } from '../helpers/hop.ts';

describe.skipIf(findNatsServer() === null)('one message per org on the durable hop (NATS mode)', () => {
  let nats: NatsServerHandle;
  let svc: TestService;
  let nc: NatsConnection;
  let orgs: OrgCreds[];

  beforeAll(async () => {
    nats = await startNatsServer();
    // no data plane: what the relay published stays in the stream to be looked at
    svc = await startService({ natsUrl: nats.url, deliver: false });
    orgs = ['hop-a', 'hop-b', 'hop-c'].map((n) => svc.createOrg(n));
    nc = await connect({ servers: nats.url, name: 'producer' });
  });
  afterAll(async () => {
    await nc?.close();
    await svc?.stop();
    await nats?.stop();
  });

  it("facts of three orgs committed together: each message holds one org's events, each event is in one message", async () => {
    const n = 300;
    const observed: string[] = [];
    nc.subscribe('svc.events.>', { callback: (_e, m) => void observed.push(JSON.parse(m.string()).id) });
    await nc.flush();
    const facts = Array.from({ length: n }, (_, i) => {
      const org = orgs[i % orgs.length].org_id;
      const id = rid('wfh');
      return {
        subject: `svc.ingest.${org}.workflows.${id}`,
        body: JSON.stringify({
          kind: 'workflow',
          transition: 'started',
          workflow: { id, type: 'provision', owner_id: 'inst_h', owner_type: 'installs' },
        }),
      };
    });
    const replies = await Promise.all(facts.map((f) => ingestRequest(nc, f.subject, f.body, { timeout: 20_000 })));
    expect(replies.every((r) => r.json<{ ok: boolean }>().ok)).toBe(true);
    await waitFor(() => observed.length >= n, 20_000, 'every event mirrored');

    const jsm = await jetstreamManager(nc);
    await waitFor(async () => (await eventsStored(jsm)) >= n, 20_000, 'every event stored');
    const info = await jsm.streams.info(EVENTS_STREAM);
    const ids: string[] = [];
    const msgIds = new Set<string>();
    let split = 0;
    for (let seq = info.state.first_seq; seq <= info.state.last_seq; seq++) {
      const m = await jsm.streams.getMessage(EVENTS_STREAM, { seq });
      if (!m) continue;
      const events = decodeHopBatch(m.data)!;
      const msgOrgs = new Set(events.map((e) => decodeRoute(e.route)!.org));
      expect(msgOrgs.size).toBe(1);
      const msgId = m.header.get('Nats-Msg-Id');
      const [org] = msgOrgs;
      // its batch's id alone, or `<batch>.<org>` when the batch held several orgs
      if (msgId.endsWith(`.${org}`)) split++;
      else expect(msgId).toBe(events[0].id);
      msgIds.add(msgId);
      ids.push(...events.map((e) => e.id));
    }
    expect(ids.length).toBe(n);
    expect(new Set(ids)).toEqual(new Set(observed));
    expect(msgIds.size).toBe(info.state.messages);
    // facts of the three orgs arrived interleaved: batches held several orgs, and were split
    expect(split).toBeGreaterThan(0);
  });
});
