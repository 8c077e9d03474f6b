import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { connect } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { BusRequestError, type Bus, type BusLogger } from '../../src/bus/bus.ts';
import { createMemoryBus } from '../../src/bus/memory.ts';
import { createNatsBus } from '../../src/bus/nats/nats-connection.ts';
import { ensureLayout } from '../../src/bus/nats/jetstream.ts';
import { ingestWildcard, jobResultSubject, jobSubject } from '../../src/bus/subjects.ts';
import { startNatsServer, type NatsServerHandle } from '../helpers/nats-server.ts';
import { waitFor } from '../helpers/wait.ts';
import { ManualClock } from '../helpers/clock.ts';

const dec = new TextDecoder();

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
    await waitFor(() => got.all.length === 6 && got.gt.length === 4 && got.star.length === 2 && got.exact.length === 1);
    await bus.flush(); // a round trip after the publishes: a message that should not have matched would be here by now
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
    await bus.flush(); // a second copy to the group would be here by now
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
    await bus.flush(); // after the round trip, '2' would have arrived
    expect(got).toEqual(['1']);
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
      await expect(ensureLayout(nc, jsm)).rejects.toThrow(/GREEDY.*svc\.ingest/);
    } finally {
      await nc.close();
    }
  });

  it('rejects when no server listens', async () => {
    const url = server.url;
    await server.stop();
    await expect(createNatsBus(url, { logger })).rejects.toThrow(`cannot connect to NATS at ${url}`);
    server = await startNatsServer();
  });
});

describe('memory bus on an injected clock', () => {
  it('times a request out when its clock says so, not before; an answer in time cancels the timeout', async () => {
    const clock = new ManualClock();
    const bus = createMemoryBus({ logger: capture().logger, clock });
    try {
      bus.subscribe('svc.silent', () => undefined);
      let settled: string | null = null;
      const silent = bus.request('svc.silent', 'x', { timeoutMs: 5000 }).then(
        () => (settled = 'answered'),
        (err: BusRequestError) => (settled = err.code),
      );
      await bus.flush();
      clock.advance(4999);
      await bus.flush();
      expect(settled).toBeNull();
      clock.advance(1);
      await silent;
      expect(settled).toBe('timeout');

      bus.subscribe('svc.echo', (m) => void m.respond(m.data));
      const r = await bus.request('svc.echo', 'hi', { timeoutMs: 5000 });
      expect(dec.decode(r.data)).toBe('hi');
      expect(clock.pending()).toBe(0);
    } finally {
      await bus.close();
    }
  });
});
