import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { connect } from '@nats-io/transport-node';
import { jetstreamManager, RetentionPolicy, StorageType } from '@nats-io/jetstream';
import { BusRequestError, type Bus, type BusLogger } from '../src/bus/bus.ts';
import { createMemoryBus } from '../src/bus/memory.ts';
import { createNatsBus, DISPATCH_CONSUMER, EVENTS_STREAM } from '../src/bus/nats.ts';
import { eventSubject, ingestWildcard, jobResultSubject, jobSubject } from '../src/bus/subjects.ts';
import { startNatsServer, type NatsServerHandle } from './helpers/nats-server.ts';

const dec = new TextDecoder();
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

async function waitFor(cond: () => boolean, timeoutMs = 5000, what = 'condition'): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

interface Warning {
  o: object;
  m?: string;
}

interface Env {
  /** A new bus on the same "server" (the memory bus is one process: always the same bus). */
  bus(): Promise<Bus>;
  warnings: Warning[];
  logger: BusLogger;
  cleanup(): Promise<void>;
}

function capture(): { warnings: Warning[]; logger: BusLogger } {
  const warnings: Warning[] = [];
  return { warnings, logger: { warn: (o, m) => warnings.push({ o, m }) } };
}

const implementations: Array<{ name: 'memory' | 'nats'; setup(): Promise<Env> }> = [
  {
    name: 'memory',
    async setup() {
      const { warnings, logger } = capture();
      const bus = createMemoryBus({ logger });
      return { bus: async () => bus, warnings, logger, cleanup: () => bus.close() };
    },
  },
  {
    name: 'nats',
    async setup() {
      const { warnings, logger } = capture();
      const server = await startNatsServer();
      const buses: Bus[] = [];
      return {
        warnings,
        logger,
        async bus() {
          const b = await createNatsBus(server.url, { name: 'svc-test', logger });
          buses.push(b);
          return b;
        },
        async cleanup() {
          await Promise.allSettled(buses.map((b) => b.close()));
          await server.stop();
        },
      };
    },
  },
];

describe.each(implementations)('bus ($name)', ({ name, setup }) => {
  let env: Env;
  let bus: Bus;

  beforeEach(async () => {
    env = await setup();
    bus = await env.bus();
  });
  afterEach(async () => {
    await env.cleanup();
  });

  it('has the right kind', () => {
    expect(bus.kind).toBe(name);
  });

  it('matches subjects with * and > wildcards', async () => {
    const got: Record<string, string[]> = { star: [], gt: [], exact: [], all: [] };
    bus.subscribe('t.*.c', (m) => void got.star.push(m.subject));
    bus.subscribe('t.>', (m) => void got.gt.push(m.subject));
    bus.subscribe('t.b', (m) => void got.exact.push(m.subject));
    bus.subscribe('>', (m) => void got.all.push(m.subject));
    for (const s of ['t.b.c', 't.b', 't.x.c.d', 't', 'u.b.c', 't.y.c']) bus.publish(s, 'x');
    await bus.flush();
    await waitFor(() => got.all.length === 6 && got.gt.length === 4 && got.star.length === 2 && got.exact.length === 1);
    await sleep(50);
    expect(got.star).toEqual(['t.b.c', 't.y.c']);
    expect(got.gt).toEqual(['t.b.c', 't.b', 't.x.c.d', 't.y.c']);
    expect(got.exact).toEqual(['t.b']);
    expect(got.all).toHaveLength(6);
  });

  it('delivers payloads and parses JSON', async () => {
    const got: unknown[] = [];
    bus.subscribe('svc.jobs.*.*', (m) => void got.push({ subject: m.subject, body: m.json(), raw: dec.decode(m.data) }));
    bus.publish(jobSubject('org_1', 'run_1'), JSON.stringify({ job_id: 'job_1' }));
    bus.publish(jobSubject('org_1', 'run_2'), new TextEncoder().encode('{"job_id":"job_2"}'));
    await waitFor(() => got.length === 2);
    expect(got).toEqual([
      { subject: 'svc.jobs.org_1.run_1', body: { job_id: 'job_1' }, raw: '{"job_id":"job_1"}' },
      { subject: 'svc.jobs.org_1.run_2', body: { job_id: 'job_2' }, raw: '{"job_id":"job_2"}' },
    ]);
  });

  it('gives each message to one member of a queue group, and to every plain subscriber', async () => {
    const a: number[] = [];
    const b: number[] = [];
    const plain: number[] = [];
    bus.subscribe('svc.jobs.org_1.*', (m) => void a.push(m.json<number>()), { queue: 'workers' });
    bus.subscribe('svc.jobs.org_1.*', (m) => void b.push(m.json<number>()), { queue: 'workers' });
    bus.subscribe('svc.jobs.org_1.*', (m) => void plain.push(m.json<number>()));
    for (let i = 0; i < 40; i++) bus.publish(jobSubject('org_1', 'r1'), String(i));
    await waitFor(() => plain.length === 40 && a.length + b.length === 40);
    await sleep(50);
    expect(a.length + b.length).toBe(40);
    expect(a.length).toBeGreaterThan(0);
    expect(b.length).toBeGreaterThan(0);
    expect([...a, ...b].sort((x, y) => x - y)).toEqual(plain);
  });

  it('answers requests, and rejects on no responders and on timeout', async () => {
    bus.subscribe(ingestWildcard, (m) => {
      m.respond(JSON.stringify({ ok: true, subject: m.subject, echo: m.json() }));
    });
    const r = await bus.request(jobResultSubject('org_1', 'job_1'), JSON.stringify({ status: 'started' }), { timeoutMs: 2000 });
    expect(r.json()).toEqual({ ok: true, subject: 'svc.ingest.org_1.jobs.job_1', echo: { status: 'started' } });

    const noOne = bus.request('svc.nobody.home', 'x', { timeoutMs: 2000 });
    await expect(noOne).rejects.toBeInstanceOf(BusRequestError);
    await expect(noOne).rejects.toMatchObject({ code: 'no_responders' });

    bus.subscribe('svc.silent', () => undefined);
    const t0 = Date.now();
    const silent = bus.request('svc.silent', 'x', { timeoutMs: 200 });
    await expect(silent).rejects.toMatchObject({ code: 'timeout' });
    expect(Date.now() - t0).toBeGreaterThanOrEqual(150);
  });

  it('respond() is false without a reply subject', async () => {
    const results: boolean[] = [];
    bus.subscribe('svc.x', (m) => void results.push(m.respond('nope')));
    bus.publish('svc.x', 'hello');
    await waitFor(() => results.length === 1);
    expect(results).toEqual([false]);
  });

  it('logs handler exceptions instead of throwing, and keeps delivering', async () => {
    const got: string[] = [];
    bus.subscribe('svc.boom', (m) => {
      if (dec.decode(m.data) === 'throw') throw new Error('sync boom');
      if (dec.decode(m.data) === 'reject') return Promise.reject(new Error('async boom'));
      got.push(dec.decode(m.data));
    });
    expect(() => bus.publish('svc.boom', 'throw')).not.toThrow();
    bus.publish('svc.boom', 'reject');
    bus.publish('svc.boom', 'ok');
    await waitFor(() => got.length === 1 && env.warnings.length >= 2);
    expect(got).toEqual(['ok']);
    const text = JSON.stringify(env.warnings);
    expect(text).toContain('sync boom');
    expect(text).toContain('async boom');
  });

  it('keeps the order of messages per subscription', async () => {
    const got: number[] = [];
    bus.subscribe('svc.seq', async (m) => {
      got.push(m.json<number>());
    });
    const n = 300;
    for (let i = 0; i < n; i++) bus.publish('svc.seq', String(i));
    await waitFor(() => got.length === n);
    expect(got).toEqual(Array.from({ length: n }, (_, i) => i));
  });

  it('stops delivering after unsubscribe', async () => {
    const got: string[] = [];
    const sub = bus.subscribe('svc.u', (m) => void got.push(dec.decode(m.data)));
    bus.publish('svc.u', '1');
    await waitFor(() => got.length === 1);
    sub.unsubscribe();
    bus.publish('svc.u', '2');
    await bus.flush();
    await sleep(50);
    expect(got).toEqual(['1']);
  });

  it('publishEvent reaches plain subscribers and the event consumer', async () => {
    const plain: string[] = [];
    const consumed: Array<{ subject: string; data: string }> = [];
    bus.subscribe('svc.events.org_1.>', (m) => void plain.push(m.subject));
    await bus.consumeEvents(async (subject, data) => {
      consumed.push({ subject, data: dec.decode(data) });
    });
    const s1 = eventSubject('org_1/workflow/wf_1/started');
    const s2 = eventSubject('org_1/workflow_step/wf_1/st_2/succeeded');
    await bus.publishEvent(s1, JSON.stringify({ id: 'ev_1' }), 'ev_1');
    await bus.publishEvent(s2, JSON.stringify({ id: 'ev_2' }), 'ev_2');
    await waitFor(() => plain.length === 2 && consumed.length === 2, 10_000);
    expect(plain).toEqual([s1, s2]);
    expect(consumed).toEqual([
      { subject: 'svc.events.org_1.workflow.wf_1.started', data: '{"id":"ev_1"}' },
      { subject: 'svc.events.org_1.workflow_step.wf_1.st_2.succeeded', data: '{"id":"ev_2"}' },
    ]);
  });

  it('publishEvent rejects a subject outside svc.events.>', async () => {
    await expect(bus.publishEvent('svc.ingest.org_1.jobs.j1', '{}', 'x1')).rejects.toThrow();
  });

  it('consumes events in order, one at a time', async () => {
    const got: number[] = [];
    let active = 0;
    let maxActive = 0;
    await bus.consumeEvents(async (_s, data) => {
      active++;
      maxActive = Math.max(maxActive, active);
      await sleep(1);
      got.push(Number(dec.decode(data)));
      active--;
    });
    const n = 50;
    for (let i = 0; i < n; i++) await bus.publishEvent(eventSubject(`org_1/workflow/wf_${i}/started`), String(i), `ord_${i}`);
    await waitFor(() => got.length === n, 10_000);
    expect(got).toEqual(Array.from({ length: n }, (_, i) => i));
    expect(maxActive).toBe(1);
  });

  it('dedupes events by msgId for the consumer', async () => {
    const consumed: string[] = [];
    await bus.consumeEvents(async (_s, data) => void consumed.push(dec.decode(data)));
    const s = eventSubject('org_1/workflow/wf_1/started');
    await bus.publishEvent(s, 'first', 'dup_1');
    await bus.publishEvent(s, 'again', 'dup_1');
    await bus.publishEvent(s, 'other', 'dup_2');
    await waitFor(() => consumed.length >= 2, 10_000);
    await sleep(200);
    expect(consumed).toEqual(['first', 'other']);
  });

  it('redelivers an event whose handler rejects (acked only after the handler resolves)', async () => {
    const calls: string[] = [];
    let failed = false;
    await bus.consumeEvents(async (_s, data) => {
      calls.push(dec.decode(data));
      if (!failed) {
        failed = true;
        throw new Error('dispatch failed');
      }
    });
    await bus.publishEvent(eventSubject('org_1/workflow/wf_1/started'), 'e1', 'redeliver_1');
    await waitFor(() => calls.length === 2, 10_000, 'redelivery');
    await sleep(200);
    expect(calls).toEqual(['e1', 'e1']);
    expect(JSON.stringify(env.warnings)).toContain('dispatch failed');
  });

  it('stops consuming after unsubscribe', async () => {
    const consumed: string[] = [];
    const sub = await bus.consumeEvents(async (_s, data) => void consumed.push(dec.decode(data)));
    await bus.publishEvent(eventSubject('org_1/workflow/wf_1/started'), 'a', 'stop_1');
    await waitFor(() => consumed.length === 1, 10_000);
    sub.unsubscribe();
    await sleep(100);
    await bus.publishEvent(eventSubject('org_1/workflow/wf_2/started'), 'b', 'stop_2');
    await sleep(300);
    expect(consumed).toEqual(['a']);
  });
});

describe('nats bus only', () => {
  let server: NatsServerHandle;
  const buses: Bus[] = [];
  const { logger, warnings } = capture();
  const newBus = async () => {
    const b = await createNatsBus(server.url, { logger });
    buses.push(b);
    return b;
  };

  beforeEach(async () => {
    warnings.length = 0;
    server = await startNatsServer();
  });
  afterEach(async () => {
    await Promise.allSettled(buses.splice(0).map((b) => b.close()));
    await server.stop();
  });

  it('creates the SVC_EVENTS stream and the svc-dispatch durable consumer at start', async () => {
    await newBus();
    const nc = await connect({ servers: server.url });
    try {
      const jsm = await jetstreamManager(nc);
      const si = await jsm.streams.info(EVENTS_STREAM);
      expect(si.config.subjects).toEqual(['svc.events.>']);
      expect(si.config.retention).toBe(RetentionPolicy.Limits);
      expect(si.config.storage).toBe(StorageType.File);
      expect(si.config.max_age).toBe(3600 * 1e9);
      expect(si.config.duplicate_window).toBe(120 * 1e9);
      const ci = await jsm.consumers.info(EVENTS_STREAM, DISPATCH_CONSUMER);
      expect(ci.config.durable_name).toBe(DISPATCH_CONSUMER);
      await expect(jsm.streams.find('svc.ingest.org_1.jobs.job_1')).rejects.toThrow();
    } finally {
      await nc.close();
    }
  });

  it('updates an existing stream to the expected limits', async () => {
    const nc = await connect({ servers: server.url });
    try {
      const jsm = await jetstreamManager(nc);
      await jsm.streams.add({ name: EVENTS_STREAM, subjects: ['svc.events.org_1.>'], max_age: 5 * 1e9, storage: StorageType.File });
      await newBus();
      const si = await jsm.streams.info(EVENTS_STREAM);
      expect(si.config.subjects).toEqual(['svc.events.>']);
      expect(si.config.max_age).toBe(3600 * 1e9);
      expect(si.config.duplicate_window).toBe(120 * 1e9);
    } finally {
      await nc.close();
    }
  });

  it('two processes consuming share the work: each event handled exactly once', async () => {
    const a = await newBus();
    const b = await newBus();
    const publisher = await newBus();
    const byA: string[] = [];
    const byB: string[] = [];
    await a.consumeEvents(async (_s, d) => {
      byA.push(dec.decode(d));
      await sleep(5);
    });
    await b.consumeEvents(async (_s, d) => {
      byB.push(dec.decode(d));
      await sleep(5);
    });
    const n = 60;
    await Promise.all(
      Array.from({ length: n }, (_, i) => publisher.publishEvent(eventSubject(`org_1/workflow/wf_${i}/started`), `ev_${i}`, `share_${i}`)),
    );
    await waitFor(() => byA.length + byB.length >= n, 15_000, 'all events');
    await sleep(500);
    const all = [...byA, ...byB];
    expect(all).toHaveLength(n);
    expect(new Set(all).size).toBe(n);
    expect(byA.length).toBeGreaterThan(0);
    expect(byB.length).toBeGreaterThan(0);
  });

  it('dedupes a re-publication with the same msgId across processes', async () => {
    const a = await newBus();
    const b = await newBus();
    const consumed: string[] = [];
    await a.consumeEvents(async (_s, d) => void consumed.push(dec.decode(d)));
    const s = eventSubject('org_1/workflow/wf_1/succeeded');
    await a.publishEvent(s, 'from a', 'evt_same');
    await b.publishEvent(s, 'from b after a crash', 'evt_same');
    await waitFor(() => consumed.length >= 1, 10_000);
    await sleep(300);
    expect(consumed).toEqual(['from a']);
  });

  it('keeps events for a consumer started later (durable)', async () => {
    const producer = await newBus();
    for (let i = 0; i < 5; i++) await producer.publishEvent(eventSubject(`org_1/workflow/wf_${i}/started`), `ev_${i}`, `late_${i}`);
    await producer.close();

    const consumer = await newBus();
    const consumed: string[] = [];
    await consumer.consumeEvents(async (_s, d) => void consumed.push(dec.decode(d)));
    await waitFor(() => consumed.length === 5, 10_000);
    expect(consumed).toEqual(['ev_0', 'ev_1', 'ev_2', 'ev_3', 'ev_4']);

    // acked events are not handed out again to the next process
    await consumer.close();
    const next = await newBus();
    const again: string[] = [];
    await next.consumeEvents(async (_s, d) => void again.push(dec.decode(d)));
    await next.publishEvent(eventSubject('org_1/workflow/wf_9/started'), 'ev_9', 'late_9');
    await waitFor(() => again.length >= 1, 10_000);
    await sleep(200);
    expect(again).toEqual(['ev_9']);
  });

  it('an event left unacked by a closing process goes to another one', async () => {
    const a = await newBus();
    const b = await newBus();
    const byB: string[] = [];
    let started = false;
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const subA = await a.consumeEvents(async () => {
      started = true;
      await gate;
      throw new Error('shutting down mid-dispatch');
    });
    await a.publishEvent(eventSubject('org_1/workflow/wf_1/started'), 'ev_1', 'handoff_1');
    await waitFor(() => started, 10_000);
    await b.consumeEvents(async (_s, d) => void byB.push(dec.decode(d)));
    subA.unsubscribe();
    release();
    await waitFor(() => byB.length === 1, 10_000, 'hand-off');
    expect(byB).toEqual(['ev_1']);
  });

  it('answers svc.ingest requests from a subscriber: no stream captures them', async () => {
    const engine = await newBus();
    const producer = await newBus();
    // nobody listening: a stream would have answered with a PubAck; NATS says no responders
    await expect(producer.request('svc.ingest.org_1.jobs.job_1', '{"status":"started"}', { timeoutMs: 2000 })).rejects.toMatchObject({
      code: 'no_responders',
    });
    engine.subscribe(ingestWildcard, (m) => void m.respond(JSON.stringify({ ok: true })), { queue: 'svc-ingest' });
    await engine.flush();
    const r = await producer.request('svc.ingest.org_1.jobs.job_1', '{"status":"started"}', { timeoutMs: 2000 });
    expect(r.json()).toEqual({ ok: true });
    const r2 = await producer.request('svc.ingest.x', '{}', { timeoutMs: 2000 });
    expect(r2.json()).toEqual({ ok: true });
  });

  it('refuses to start when a stream captures ingest subjects', async () => {
    const nc = await connect({ servers: server.url });
    try {
      const jsm = await jetstreamManager(nc);
      await jsm.streams.add({ name: 'GREEDY', subjects: ['svc.>'] });
      await expect(createNatsBus(server.url, { logger })).rejects.toThrow(/GREEDY.*svc\.ingest/);
    } finally {
      await nc.close();
    }
  });

  it('rejects when no server listens', async () => {
    const url = server.url;
    await server.stop();
    await expect(createNatsBus(url, { logger })).rejects.toThrow();
    server = await startNatsServer();
  });
});
