// Parked batches go back (issue 33; src/dataplane/sources/jetstream/park-return.ts). A plane whose org
// has work enough queued parks that org's next events; a batch parked whole for PARK_RETURN_MS is
// given back to JetStream, so that another plane with nothing to do takes it, and a plane alone
// takes it again. Real nats-server, two planes on their own connections, receivers that answer
// only when the test says so, and a manual clock for the planes' timers (nothing here sleeps: each
// wait is for something a plane does).
import { randomUUID } from 'node:crypto';
import pino from 'pino';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { connect, headers as natsHeaders, type NatsConnection } from '@nats-io/transport-node';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import {
  DISPATCH_CONSUMER,
  ensureLayout,
  EVENT_ID_HEADER,
  EVENTS_STREAM,
  PROGRESS_BUCKET,
  SEAL_HEADER,
} from '../../src/bus/nats/jetstream.ts';
import { encodeHopBatch } from '../../src/bus/hop.ts';
import { newDataplaneKey, Seal } from '../../src/bus/seal.ts';
import { hopSubject } from '../../src/bus/subjects.ts';
import { encodeRoute, type EventRoute } from '../../src/domain/event-route.ts';
import { WebhookRegistry } from '../../src/dispatch/registry.ts';
import type { DeliveryPipeline } from '../../src/dataplane/pipeline.ts';
import { JetStreamSource } from '../../src/dataplane/sources/jetstream/source.ts';
import { KvProgress } from '../../src/dataplane/sources/jetstream/progress.ts';
import { PARK_RETURN_MS, PARK_RETURNS_PER_TICK } from '../../src/dataplane/sources/jetstream/park-return.ts';
import { ManualClock } from '../helpers/clock.ts';
import { heldPipeline } from '../helpers/pipeline.ts';
import { findNatsServer, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.ts';
import { waitFor } from '../helpers/wait.ts';
import { allEventsEntry } from '../helpers/webhooks.ts';

const ORG = 'org_park';
/** 4 webhooks × 32 untried attempts reach the pressure bound 4 × 16 */
const HOOKS = ['wh_p1', 'wh_p2', 'wh_p3', 'wh_p4'];
const route: EventRoute = {
  org: ORG,
  type: 'com.svc.test.park',
  resource: 'installs',
  op: 'provision',
  event: 'lifecycle.started',
  install: null,
  component: null,
  action: null,
  rev: 0,
};

interface Plane {
  nc: NatsConnection;
  pipeline: DeliveryPipeline;
  source: JetStreamSource;
  /** attempts made, by event id */
  attempts: Map<string, number>;
  /** answer every attempt in flight (delivered) */
  answerAll(): void;
}

describe.skipIf(findNatsServer() === null)('parked batches go back to JetStream', () => {
  let nats: NatsServerHandle;
  let planes: Plane[] = [];
  let producer: NatsConnection;
  const seal = new Seal(newDataplaneKey());
  const clock = new ManualClock(Date.now());

  beforeEach(async () => {
    nats = await startNatsServer();
    producer = await connect({ servers: nats.url });
    await ensureLayout(producer, await jetstreamManager(producer));
  });
  afterEach(async () => {
    for (const p of planes) {
      await p.source.stop();
      // attempts in flight end when answered (a failed test may leave some)
      const drained = p.pipeline.drain();
      p.answerAll();
      await drained;
      await p.source.released();
      await p.nc.close();
    }
    planes = [];
    await producer?.close();
    await nats?.stop();
  });
  afterAll(async () => {
    await nats?.stop();
  });

  /** Publish `batches` batches of `size` events of ORG, sealed as the relay seals them; their event ids. */
  async function publishBacklog(batches: number, size: number): Promise<string[][]> {
    const js = jetstream(producer);
    const out: string[][] = [];
    for (let b = 0; b < batches; b++) {
      const events = Array.from({ length: size }, () => ({ id: randomUUID(), route: encodeRoute(route), body: '{"specversion":"1.0"}' }));
      const body = encodeHopBatch(events);
      const id = randomUUID();
      const h = natsHeaders();
      h.set(EVENT_ID_HEADER, id);
      h.set(SEAL_HEADER, seal.sealHop(id, body, Date.now()));
      await js.publish(hopSubject, body, { msgID: id, headers: h });
      out.push(events.map((e) => e.id));
    }
    return out;
  }

  async function startPlane(name: string): Promise<Plane> {
    const nc = await connect({ servers: nats.url, name });
    const js = jetstream(nc);
    const registry = new WebhookRegistry();
    HOOKS.forEach((h, i) => registry.upsert(allEventsEntry(ORG, h, `http://${h}.test/hook`), i + 1));
    const attempts = new Map<string, number>();
    const logger = pino({ level: 'silent' });
    const { pipeline, open } = heldPipeline({ registry, clock, logger, sent: (id) => void attempts.set(id, (attempts.get(id) ?? 0) + 1) });
    const progress = new KvProgress(await new Kvm(js).open(PROGRESS_BUCKET), seal);
    const source = new JetStreamSource({ js, workerId: name, seal, pipeline, progress, clock, logger, dropped: () => {} });
    await source.start();
    await nc.flush();
    const plane: Plane = {
      nc,
      pipeline,
      source,
      attempts,
      answerAll: () => {
        for (const done of open.splice(0)) done({ delivered: true, status: 200, duration_ms: 1 });
      },
    };
    planes.push(plane);
    return plane;
  }

  const pending = async () => (await (await jetstreamManager(producer)).consumers.info(EVENTS_STREAM, DISPATCH_CONSUMER)).num_pending;

  /** Batches parked whole: those whose events are all past the ones fanned out (published and taken in order). */
  const wholeParked = (batches: number, size: number, parked: number) => batches - Math.ceil((batches * size - parked) / size);
  /** What goes back after PARK_RETURN_MS: the batches parked whole, PARK_RETURNS_PER_TICK at most. */
  const goesBack = (batches: number, size: number, parked: number) => Math.min(PARK_RETURNS_PER_TICK, wholeParked(batches, size, parked));

  /** Answer attempts on both planes, the clock ticking, until every event has had one at each webhook. */
  async function deliverAll(ps: Plane[], events: number): Promise<void> {
    const attempts = () => ps.reduce((n, p) => n + [...p.attempts.values()].reduce((a, b) => a + b, 0), 0);
    for (let round = 0; attempts() < events * HOOKS.length || ps.some((p) => p.pipeline.held() > 0); round++) {
      if (round > 5000) throw new Error(`${attempts()} of ${events * HOOKS.length} attempts made`);
      for (const p of ps) p.answerAll();
      if (round % 20 === 19) clock.advance(PARK_RETURN_MS);
      // what was given back is on its way to a plane: wait for a plane to start something
      if (ps.every((p) => p.pipeline.inFlight() === 0)) {
        await waitFor(
          () =>
            ps.some((p) => p.pipeline.inFlight() > 0) || (attempts() >= events * HOOKS.length && ps.every((p) => p.pipeline.held() === 0)),
          10_000,
          () => `a plane to take what was given back (${attempts()} attempts)`,
        );
      }
    }
  }

  it('a plane that took a whole backlog gives back what it parked: an idle plane takes it, and nothing is attempted twice', async () => {
    const batches = await publishBacklog(12, 20);
    const first = await startPlane('plane_1');
    // the first plane takes the whole backlog (well within its window), fanning out what its
    // pressure allows and parking the rest
    await waitFor(
      () => first.pipeline.held() === 240,
      10_000,
      () => `plane 1 holds ${first.pipeline.held()}`,
    );
    expect(await pending()).toBe(0);
    const parked = first.pipeline.parkedEvents();
    expect(parked).toBeGreaterThan(200);
    const second = await startPlane('plane_2');
    expect(second.pipeline.held()).toBe(0);
    // half a second later batches parked whole go back: the idle plane's pull takes some of them
    clock.advance(PARK_RETURN_MS);
    expect(first.source.returned).toBe(goesBack(12, 20, parked));
    await waitFor(
      async () => second.pipeline.held() > 0 && (await pending()) === 0,
      10_000,
      () => `plane 1 holds ${first.pipeline.held()}, plane 2 ${second.pipeline.held()}`,
    );
    await deliverAll([first, second], 240);
    const ids = batches.flat();
    expect(ids.filter((id) => (first.attempts.get(id) ?? 0) + (second.attempts.get(id) ?? 0) !== HOOKS.length)).toEqual([]);
    expect(ids.filter((id) => second.attempts.has(id)).length).toBeGreaterThan(0);
    expect(ids.filter((id) => first.attempts.has(id)).length).toBeGreaterThan(0);
  });

  it('a plane alone takes back what it gave back, parks it again, and delivers every event once', async () => {
    const batches = await publishBacklog(8, 20);
    const only = await startPlane('plane_alone');
    await waitFor(
      () => only.pipeline.held() === 160,
      10_000,
      () => `the plane holds ${only.pipeline.held()}`,
    );
    const parked = only.pipeline.parkedEvents();
    expect(parked).toBeGreaterThan(120);
    clock.advance(PARK_RETURN_MS);
    // only batches parked whole (the one partly fanned out stays), 4 at a time
    expect(only.source.returned).toBe(goesBack(8, 20, parked));
    expect(only.pipeline.held()).toBeLessThan(160);
    // handed out again to its own pull, and parked again
    await waitFor(
      async () => only.pipeline.held() === 160 && (await pending()) === 0,
      10_000,
      () => `the plane holds ${only.pipeline.held()}`,
    );
    expect(only.pipeline.parkedEvents()).toBe(parked);
    await deliverAll([only], 160);
    expect(batches.flat().filter((id) => only.attempts.get(id) !== HOOKS.length)).toEqual([]);
  });
});
