// The durable hop (src/bus/hop.ts, src/handoff/outbox-relay.ts): events travel to data planes in
// batches, one JetStream message each, with the exact bytes of every event; a batch is fixed when
// its events are committed, and facts committed while a publish is under way share one message.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstream, jetstreamManager, RetentionPolicy } from '@nats-io/jetstream';
import { decodeHopBatch, encodeHopBatch } from '../../src/bus/hop.ts';
import { ensureLayout, EVENTS_STREAM } from '../../src/bus/nats/jetstream.ts';
import { hopSubject } from '../../src/bus/subjects.ts';
import { MAX_BATCH_BYTES, MAX_BATCH_EVENTS } from '../../src/handoff/outbox-relay.ts';
import { findNatsServer, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.ts';
import { startService, waitFor, type OrgCreds, type TestService } from '../helpers/service.ts';
import { rid } from '../helpers/ids.ts';
import { ingestRequest } from '../helpers/producer.ts';
import { eventsStored } from '../helpers/hop.ts';

describe('hop batch wire format', () => {
  it('carries each event id, route and exact body bytes, and refuses anything else', () => {
    const events = [
      { id: 'e1', route: '{"org":"org_1"}', body: '{"a":"é\\n"}' },
      { id: 'e2', route: '{"org":"org_2"}', body: Buffer.from('') },
      { id: 'e3', route: 'r', body: Buffer.from([0x7b, 0x0a, 0x7d]) },
    ];
    const wire = encodeHopBatch(events);
    const back = decodeHopBatch(wire)!;
    expect(back.map((e) => [e.id, e.route, e.body.toString('utf8')])).toEqual([
      ['e1', '{"org":"org_1"}', '{"a":"é\\n"}'],
      ['e2', '{"org":"org_2"}', ''],
      ['e3', 'r', '{\n}'],
    ]);
    // a body is a slice of the message, not a copy
    expect(back[0].body.buffer).toBe(wire.buffer);
    expect(decodeHopBatch(wire.subarray(0, wire.length - 1))).toBeNull(); // cut short
    expect(decodeHopBatch(Buffer.concat([wire, Buffer.from('x')]))).toBeNull(); // trailing bytes
    expect(decodeHopBatch(Buffer.from('{"v":2,"e":[["e1","r",0]]}\n'))).toBeNull(); // another version
    expect(decodeHopBatch(Buffer.from('{"v":1,"e":[]}\n'))).toBeNull(); // empty
    expect(decodeHopBatch(Buffer.from('{"specversion":"1.0"}'))).toBeNull(); // a bare CloudEvent
  });
});

describe.skipIf(findNatsServer() === null)('batches on the durable hop (NATS mode)', () => {
  let nats: NatsServerHandle;
  let svc: TestService;
  let nc: NatsConnection;
  let org: OrgCreds;

  beforeAll(async () => {
    nats = await startNatsServer();
    // no data plane: what the relay published stays in the stream to be looked at
    svc = await startService({ natsUrl: nats.url, deliver: false });
    org = svc.createOrg('hop');
    nc = await connect({ servers: nats.url, name: 'producer' });
  });
  afterAll(async () => {
    await nc?.close();
    await svc?.stop();
    await nats?.stop();
  });

  it('facts arriving together share messages; every event is in exactly one, and observers get each once', async () => {
    const observed: string[] = [];
    nc.subscribe(`svc.events.${org.org_id}.>`, { callback: (_e, m) => void observed.push(JSON.parse(m.string()).id) });
    await nc.flush();
    const n = 400;
    const facts = Array.from({ length: n }, () => {
      const id = rid('wfh');
      return {
        subject: `svc.ingest.${org.org_id}.workflows.${id}`,
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
    const sizes: number[] = [];
    for (let seq = info.state.first_seq; seq <= info.state.last_seq; seq++) {
      const m = await jsm.streams.getMessage(EVENTS_STREAM, { seq });
      if (!m) continue;
      expect(m.subject).toBe(hopSubject);
      const events = decodeHopBatch(m.data)!;
      expect(m.header.get('Nats-Msg-Id')).toBe(events[0].id); // a batch's id is its first event's
      ids.push(...events.map((e) => e.id));
      sizes.push(events.length);
      expect(events.length).toBeLessThanOrEqual(MAX_BATCH_EVENTS);
      expect(events.reduce((k, e) => k + e.body.length + e.route.length, 0)).toBeLessThanOrEqual(MAX_BATCH_BYTES);
    }
    expect(ids.length).toBe(n);
    expect(new Set(ids).size).toBe(n);
    expect(new Set(observed).size).toBe(n);
    expect(new Set(ids)).toEqual(new Set(observed));
    // 400 facts sent at once are committed in groups and published while earlier publishes wait:
    // far fewer messages than events
    expect(sizes.length).toBeLessThan(n / 4);
  });
});

describe.skipIf(findNatsServer() === null)('a NATS setup of an older svc', () => {
  it("an engine refuses to start over the older svc's undelivered queue (svc.events.>), and takes over an empty one", async () => {
    const nats = await startNatsServer();
    const nc = await connect({ servers: nats.url });
    try {
      const jsm = await jetstreamManager(nc);
      await jsm.streams.add({ name: EVENTS_STREAM, subjects: ['svc.events.>'], retention: RetentionPolicy.Workqueue });
      await jetstream(nc).publish('svc.events.org_1.workflow.wf_1.started', '{}');
      await expect(ensureLayout(nc, jsm)).rejects.toThrow(
        /holds 1 messages on svc\.events\.>, queued by an older svc.*Let the older svc deliver them first/,
      );
      expect((await jsm.streams.info(EVENTS_STREAM)).config.subjects).toEqual(['svc.events.>']); // nothing changed
      await jsm.streams.purge(EVENTS_STREAM);
      await ensureLayout(nc, jsm);
      expect((await jsm.streams.info(EVENTS_STREAM)).config.subjects).toEqual(['svc.hop.>']);
    } finally {
      await nc.close();
      await nats.stop();
    }
  });
});
