// Replays on the bus (CONTRACT 6.7): a sealed event that was delivered is never delivered again
// because someone published its batch (src/bus/hop.ts) again later, and an outcome batch is applied once, on a real
// nats-server without authentication; an old legitimate backlog is still delivered.
//
// The replay window (2 min in production: src/bus/nats/jetstream.ts REPLAY_WINDOW_MS) is shortened to
// WINDOW_MS here, and so are the streams' duplicate windows (10 min in production, longer than the
// replay window): JetStream stamps messages with the real time, so the test waits WINDOW_MS for real.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pino from 'pino';
import { connect, headers, nanos, type Msg, type NatsConnection } from '@nats-io/transport-node';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { EVENTS_STREAM, OUTCOMES_STREAM, SEAL_HEADER } from '../../src/bus/nats/jetstream.ts';
import { decodeHopBatch } from '../../src/bus/hop.ts';
import { hopSubject } from '../../src/bus/subjects.ts';
import { Seal } from '../../src/bus/seal.ts';
import { systemClock } from '../../src/domain/clock.ts';
import { decodeOutcomeBatch, encodeOutcomeBatch } from '../../src/outcomes/outcome.ts';
import { startNatsDataPlane, type DataPlane } from '../../src/dataplane/data-plane.ts';
import { resolveDataplaneKey } from '../../src/bus/nats/dataplane-key.ts';
import { openDb } from '../../store/db.ts';
import { findNatsServer, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.ts';
import { startReceiver, type Receiver } from '../helpers/receiver.ts';
import { startService, waitFor, type OrgCreds, type TestService } from '../helpers/service.ts';
import { post } from '../helpers/workflows.ts';
import { rid } from '../helpers/ids.ts';
import { ingestRequest } from '../helpers/producer.ts';

const WINDOW_MS = 1500;

/** A data plane of its own on this connection (as a svc worker is), with the shortened replay window. */
function dataPlane(nc: NatsConnection, svc: TestService, workerId: string): Promise<DataPlane> {
  return startNatsDataPlane({
    nc,
    seal: new Seal(keyOf(svc.db)),
    limits: { concurrency: 16, timeoutMs: 5000, allowPrivateTargets: true },
    workerId,
    clock: systemClock,
    logger: pino({ level: 'silent' }),
    replayWindowMs: WINDOW_MS,
  });
}

function externalStarted(orgId: string) {
  const id = rid('wfr');
  return {
    natsSubject: `svc.ingest.${orgId}.workflows.${id}`,
    body: JSON.stringify({
      kind: 'workflow',
      transition: 'started',
      workflow: { id, type: 'provision', owner_id: 'inst_r', owner_type: 'installs' },
    }),
    ceSubject: `${orgId}/workflow/${id}/started`,
    eventSubject: `svc.events.${orgId}.workflow.${id}.started`,
  };
}

async function metric(url: string, name: string, labels: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name}{${labels}}`));
  return line ? Number(line.split(' ').pop()) : 0;
}

function keyOf(dbPath: string): Buffer {
  const db = openDb(dbPath);
  try {
    return resolveDataplaneKey(db, null);
  } finally {
    db.close();
  }
}

/** Wait (for real) until JetStream would store a message sealed at `sealedAt` as a replay. */
const pastWindow = (sealedAt: number) =>
  waitFor(() => Date.now() > sealedAt + WINDOW_MS + 200, WINDOW_MS + 5000, 'the replay window to pass');

describe.skipIf(findNatsServer() === null)('replays (CONTRACT 6.7)', () => {
  let nats: NatsServerHandle;
  let svc: TestService;
  let rx: Receiver;
  let nc: NatsConnection;
  let org: OrgCreds;
  let webhookId: string;
  let planeNc: NatsConnection;
  let plane: DataPlane;
  const captured: Msg[] = [];

  beforeAll(async () => {
    nats = await startNatsServer();
    rx = await startReceiver();
    // a data plane of its own, as a svc worker is: its outcome batches travel on svc.outcomes
    // (svc serve's own delivery hands them to the engine in process)
    svc = await startService({ natsUrl: nats.url, deliver: false }, { replayWindowMs: WINDOW_MS });
    planeNc = await connect({ servers: nats.url, name: 'worker' });
    plane = await dataPlane(planeNc, svc, 'replay_worker');
    org = svc.createOrg('replay');
    webhookId = (await post(svc.api(org), '/v1/orgs/current/webhooks', { webhook_url: rx.hook('all') })).webhook_id;
    nc = await connect({ servers: nats.url, name: 'attacker' });
    // what anyone on an open NATS can see: every batch of events and every outcome batch, headers and body
    nc.subscribe('svc.hop.>', { callback: (_e, m) => void captured.push(m) });
    nc.subscribe('svc.outcomes.>', { callback: (_e, m) => void captured.push(m) });
    await nc.flush();
    // the duplicate windows shortened below the replay window (in production they are longer)
    const jsm = await jetstreamManager(nc);
    await jsm.streams.update(EVENTS_STREAM, { duplicate_window: nanos(200) });
    await jsm.streams.update(OUTCOMES_STREAM, { duplicate_window: nanos(200) });
  });
  afterAll(async () => {
    await nc?.close();
    await plane?.drain();
    await planeNc?.close();
    await svc?.stop();
    await rx?.close();
    await nats?.stop();
  });

  const attempts = async () =>
    (await svc.api(org).get(`/v1/orgs/current/webhooks/${webhookId}`)).body.delivery_status.attempts_total as number;

  it(
    'a delivered event published again after the window, as captured, is not delivered again and is counted replayed; outcome ' +
      'batches published again are applied once',
    async () => {
      const fact = externalStarted(org.org_id);
      expect((await ingestRequest(nc, fact.natsSubject, fact.body, { timeout: 5000 })).json()).toEqual({ ok: true });
      await waitFor(() => rx.subjects('all').includes(fact.ceSubject), 10_000, 'the event delivered');
      const event = await waitFor(
        () =>
          captured.find((m) => m.subject === hopSubject && decodeHopBatch(m.data)?.some((e) => e.body.toString().includes(fact.ceSubject))),
        5000,
        'the batch of the event captured',
      );
      const events = decodeHopBatch(event.data)!;
      const eventId = events.find((e) => e.body.toString().includes(fact.ceSubject))!.id;
      const batch = await waitFor(
        () =>
          captured.find(
            (m) => m.subject.startsWith('svc.outcomes.') && decodeOutcomeBatch(m.string())?.outcomes.some((o) => o.event_id === eventId),
          ),
        5000,
        'its outcome batch captured',
      );
      await waitFor(async () => (await attempts()) === 1, 5000, 'the attempt counted');

      const sealedAt = Number(event.headers!.get(SEAL_HEADER).split('.')[0]);
      expect(sealedAt).toBeGreaterThan(Date.now() - 60_000);
      await pastWindow(Math.max(sealedAt, decodeOutcomeBatch(batch.string())!.sent_at));
      const replayed0 = await metric(svc.url, 'svc_events_dropped_total', 'reason="replayed"');
      const forged0 = await metric(svc.url, 'svc_events_dropped_total', 'reason="forged"');
      const js = jetstream(nc);
      // 1. the batch as captured (Nats-Msg-Id, seal, body): stored again, not a duplicate any more
      const ack = await js.publish(event.subject, event.data, { headers: event.headers });
      expect(ack.duplicate).toBe(false);
      // 2. without Nats-Msg-Id: the batch id is part of the seal, so it does not open
      const bare = headers();
      bare.set(SEAL_HEADER, event.headers!.get(SEAL_HEADER));
      await js.publish(event.subject, event.data, { headers: bare });
      // 3. the outcome batch as captured, and again without its Nats-Msg-Id (the batch id)
      expect((await js.publish(batch.subject, batch.data, { headers: batch.headers })).duplicate).toBe(false);
      const batchBare = headers();
      batchBare.set(SEAL_HEADER, batch.headers!.get(SEAL_HEADER));
      await js.publish(batch.subject, batch.data, { headers: batchBare });
      // 4. a batch made up (another id, a seal made up)
      const madeUp = encodeOutcomeBatch({ ...decodeOutcomeBatch(batch.string())!, id: 'forged.1', sent_at: Date.now() });
      const madeUpHdrs = headers();
      madeUpHdrs.set(SEAL_HEADER, new Seal(Buffer.alloc(32, 7)).sealBatch(madeUp));
      await js.publish(batch.subject, madeUp, { msgID: 'forged.1', headers: madeUpHdrs });

      // counted per event of the batch
      await waitFor(
        async () => (await metric(svc.url, 'svc_events_dropped_total', 'reason="replayed"')) === replayed0 + events.length,
        10_000,
        'the replay counted',
      );
      await waitFor(
        async () => (await metric(svc.url, 'svc_events_dropped_total', 'reason="forged"')) === forged0 + 1,
        10_000,
        'the copy without an id counted forged',
      );
      // a genuine event after all of them is delivered, and its batch applied (batches are applied in order)
      const next = externalStarted(org.org_id);
      expect((await ingestRequest(nc, next.natsSubject, next.body, { timeout: 5000 })).json()).toEqual({ ok: true });
      await waitFor(() => rx.subjects('all').includes(next.ceSubject), 10_000, 'the next event delivered');
      await waitFor(async () => (await attempts()) >= 2, 10_000, 'the next attempt counted');
      await svc.settled(10_000);
      expect(rx.subjects('all').filter((s) => s === fact.ceSubject)).toHaveLength(1);
      expect(await attempts()).toBe(2);
      expect(await metric(svc.url, 'svc_events_dropped_total', 'reason="replayed"')).toBe(replayed0 + events.length);
    },
  );
});

describe.skipIf(findNatsServer() === null)('an old backlog (CONTRACT 6.7)', () => {
  let nats: NatsServerHandle;
  let svc: TestService;
  let rx: Receiver;
  let nc: NatsConnection;

  beforeAll(async () => {
    nats = await startNatsServer();
    rx = await startReceiver();
    svc = await startService({ natsUrl: nats.url, deliver: false }, { replayWindowMs: WINDOW_MS });
    nc = await connect({ servers: nats.url, name: 'producer' });
  });
  afterAll(async () => {
    await nc?.close();
    await svc?.stop();
    await rx?.close();
    await nats?.stop();
  });

  it('events published while no data plane ran are delivered long after they were sealed', async () => {
    const org = svc.createOrg('backlog');
    await post(svc.api(org), '/v1/orgs/current/webhooks', { webhook_url: rx.hook('late') });
    // observers get each event as its batch is published (CONTRACT 5.2); then it is stored
    const stored: string[] = [];
    nc.subscribe(`svc.events.${org.org_id}.>`, { callback: (_e, m) => void stored.push(m.subject) });
    await nc.flush();
    const facts = [externalStarted(org.org_id), externalStarted(org.org_id)];
    for (const f of facts) expect((await ingestRequest(nc, f.natsSubject, f.body, { timeout: 5000 })).json()).toEqual({ ok: true });
    await waitFor(() => facts.every((f) => stored.includes(f.eventSubject)), 10_000, 'the events published');
    const jsm = await jetstreamManager(nc);
    await waitFor(async () => (await jsm.streams.info(EVENTS_STREAM)).state.messages >= 1, 10_000, 'the events stored');
    const queuedAt = Date.now();
    await pastWindow(queuedAt);
    // a data plane starts only now (with the same shortened window)
    const plane = await dataPlane(nc, svc, 'late_plane');
    try {
      for (const f of facts) await waitFor(() => rx.subjects('late').includes(f.ceSubject), 10_000, 'the old backlog delivered');
      expect(rx.subjects('late')).toHaveLength(facts.length);
    } finally {
      await plane.drain();
    }
  });
});
