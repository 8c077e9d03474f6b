// Ready means ready (CONTRACT 1, issue 22): `listening on` and `worker ready` are promises. A
// producer that sends the moment it reads the line is answered, never "no responders"; GET /readyz
// says whether this process should get traffic (before ready, while NATS is down, from SIGTERM on).
// Real processes (bin/svc.mjs), a real nats-server, a real HTTP receiver.
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDb } from '../../store/db.ts';
import { findNatsServer, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.ts';
import { children, dataplaneKey, sigterm, spawnService, spawnWorker } from '../helpers/child-service.ts';
import { startReceiver, type Receiver } from '../helpers/receiver.ts';
import { newDbWithOrg, startService, tmpDir } from '../helpers/service.ts';
import { Readiness } from '../../src/readiness.ts';
import { createHttpApp } from '../../src/http/app.ts';
import { waitFor } from '../helpers/wait.ts';
import { rid } from '../helpers/ids.ts';
import { ingestRequest } from '../helpers/producer.ts';
import { insertWebhooks } from '../helpers/webhooks.ts';

const HAVE_NATS = findNatsServer() !== null;
/** starts of svc serve on one database, and the burst each start gets at its line */
const STARTS = Number(process.env.READINESS_STARTS ?? 20);
const BURST = 50;

afterAll(() => {
  for (const c of children) c.kill('SIGKILL');
});

function newDb(): { db: string; orgId: string } {
  const { db, org } = newDbWithOrg('ready');
  return { db, orgId: org.org_id };
}

/** An external workflow's `started`: one valid fact (CONTRACT 5.2), a distinct workflow each time. */
function startedFact(orgId: string): { id: string; subject: string; body: string } {
  const W = rid('wfx');
  return {
    id: W,
    subject: `svc.ingest.${orgId}.workflows.${W}`,
    body: JSON.stringify({
      kind: 'workflow',
      transition: 'started',
      workflow: { id: W, type: 'manual_deploy', owner_id: 'inst_ext', owner_type: 'installs' },
    }),
  };
}

/** Send `n` facts at once; resolves each answer (or the error's text). */
async function burst(nc: NatsConnection, orgId: string, n: number): Promise<string[]> {
  return Promise.all(
    Array.from({ length: n }, async () => {
      const f = startedFact(orgId);
      try {
        const m = await ingestRequest(nc, f.subject, f.body, { timeout: 5000 });
        return m.string();
      } catch (err) {
        return `error: ${(err as Error).message}`;
      }
    }),
  );
}

async function readyz(url: string): Promise<{ status: number; body: { ready: boolean; reasons?: string[] } }> {
  const r = await fetch(`${url}/readyz`);
  return { status: r.status, body: await r.json() };
}

describe('the readiness object', () => {
  it('ready once every part has reported; a part can go and come back; never again once stopping', async () => {
    const r = new Readiness({ http: 'port not bound', subs: 'subscriptions not confirmed' });
    expect(r.state()).toEqual({ ready: false, reasons: ['port not bound', 'subscriptions not confirmed'] });
    let resolved = false;
    const first = r.whenReady().then(() => (resolved = true));
    r.ready('http');
    await new Promise((x) => setImmediate(x));
    expect(resolved).toBe(false);
    expect(r.state()).toEqual({ ready: false, reasons: ['subscriptions not confirmed'] });
    r.ready('subs');
    await first;
    expect(r.state()).toEqual({ ready: true, reasons: [] });
    r.ready('subs'); // twice: no harm
    r.notReady('nats', 'the NATS connection is down (reconnecting)');
    expect(r.state()).toEqual({ ready: false, reasons: ['the NATS connection is down (reconnecting)'] });
    r.ready('nats');
    expect(r.isReady()).toBe(true);
    await r.whenReady(); // already ready: at once
    r.stopping();
    r.ready('nats');
    expect(r.state()).toEqual({ ready: false, reasons: ['shutting down'] });
    r.notReady('nats', 'down');
    expect(r.state().reasons).toEqual(['shutting down', 'down']);
  });
});

describe('GET /readyz in process (embedded bus)', () => {
  it('503 with the reasons before ready, 200 once ready, 503 from stop() on while the drain holds', async () => {
    const receiver = await startReceiver();
    const svc = await startService({ deliveryTimeoutMs: 4000 });
    try {
      // the same app with a readiness that is not there yet (the moment between bind and ready)
      const early = createHttpApp({
        ...svc.server.ctx,
        readiness: new Readiness({ subs: 'the bus subscriptions are not confirmed by the server yet' }),
      });
      const before = await early.request('/readyz');
      expect(before.status).toBe(503);
      expect(await before.json()).toEqual({ ready: false, reasons: ['the bus subscriptions are not confirmed by the server yet'] });
      expect((await early.request('/healthz')).status).toBe(200);

      expect(await readyz(svc.url)).toEqual({ status: 200, body: { ready: true } });
      svc.server.readiness.notReady('nats', 'the NATS connection is down (reconnecting)');
      expect(await readyz(svc.url)).toEqual({
        status: 503,
        body: { ready: false, reasons: ['the NATS connection is down (reconnecting)'] },
      });
      svc.server.readiness.ready('nats');
      expect((await readyz(svc.url)).status).toBe(200);

      // the embedded bus: a fact sent the moment startServer resolved is answered
      const org = svc.createOrg('ready');
      receiver.set('hang', { hang: true });
      expect((await svc.api(org).post('/v1/orgs/current/webhooks', { webhook_url: receiver.hook('hang') })).status).toBe(201);
      const f = startedFact(org.org_id);
      expect((await svc.server.bus.request(f.subject, f.body, { timeoutMs: 5000 })).json()).toEqual({ ok: true });
      await waitFor(() => receiver.at('hang').length > 0, 10_000, 'a delivery in flight');
      const stopped = svc.stop(); // the delivery in flight holds the drain
      expect(await readyz(svc.url)).toEqual({ status: 503, body: { ready: false, reasons: ['shutting down'] } });
      const late = startedFact(org.org_id);
      await expect(svc.server.bus.request(late.subject, late.body, { timeoutMs: 5000 })).rejects.toMatchObject({ code: 'no_responders' });
      await stopped;
    } finally {
      await svc.stop();
      await receiver.close();
    }
  });
});

describe.skipIf(!HAVE_NATS)('svc serve --nats: the line is a promise', () => {
  let nats: NatsServerHandle;
  let nc: NatsConnection;
  beforeAll(async () => {
    nats = await startNatsServer();
    nc = await connect({ servers: nats.url, name: 'readiness-test' });
  });
  afterAll(async () => {
    await nc?.close();
    await nats?.stop();
  });

  it(
    `${STARTS} starts on one database: a burst of ${BURST} facts sent at the line is answered {ok: true}, every one`,
    async () => {
      const { db, orgId } = newDb();
      const t0 = Date.now();
      const failed: string[] = [];
      for (let i = 0; i < STARTS; i++) {
        // no delivery threads: what makes a start slow here is not what this test is about
        const svc = await spawnService(db, ['--nats', nats.url, '--no-local-runner', '--delivery-threads', '0']);
        const answers = await burst(nc, orgId, BURST);
        const bad = answers.filter((a) => a !== '{"ok":true}');
        if (bad.length) failed.push(`start ${i + 1}: ${bad.length} of ${BURST} not ok, e.g. ${bad[0]}`);
        expect((await sigterm(svc)).code).toBe(0);
      }
      console.log(
        `readiness: ${STARTS} starts, ${STARTS * BURST} facts sent at the line, ${failed.length} starts with failures, in ` +
          `${Date.now() - t0} ms`,
      );
      expect(failed).toEqual([]);
    },
    40_000 + STARTS * 6_000,
  );
});

/** Whether the fact of this external workflow is committed. */
function committed(db: string, workflowId: string): boolean {
  const h = openDb(db);
  try {
    return h.prepare('SELECT 1 FROM workflows WHERE workflow_id = ?').get(workflowId) !== undefined;
  } finally {
    h.close();
  }
}

describe.skipIf(!HAVE_NATS)('GET /readyz of svc serve --nats', () => {
  let receiver: Receiver;
  beforeAll(async () => {
    receiver = await startReceiver();
  });
  afterAll(async () => {
    await receiver?.close();
  });

  it('200 when ready; 503 while nats-server is down, 200 again once it is back; /healthz 200 throughout', async () => {
    const storeDir = tmpDir('svc-ready-nats-');
    let nats = await startNatsServer({ storeDir });
    const { port } = nats;
    let nc: NatsConnection | null = null;
    try {
      const { db, orgId } = newDb();
      const svc = await spawnService(db, ['--nats', nats.url, '--no-local-runner']);
      expect(await readyz(svc.url)).toEqual({ status: 200, body: { ready: true } });
      expect((await fetch(`${svc.url}/healthz`)).status).toBe(200);

      await nats.stop();
      const down = await waitFor(
        async () => {
          const r = await readyz(svc.url);
          return r.status === 503 ? r : null;
        },
        10_000,
        '/readyz to say 503 while nats-server is down',
      );
      expect(down.body.ready).toBe(false);
      expect((down.body.reasons ?? []).join('; ')).toMatch(/NATS connection is down/);
      expect((await fetch(`${svc.url}/healthz`)).status, 'liveness is not readiness').toBe(200);

      nats = await startNatsServer({ port, storeDir });
      await waitFor(async () => (await readyz(svc.url)).status === 200, 15_000, '/readyz to say 200 once nats-server is back');
      expect((await readyz(svc.url)).body).toEqual({ ready: true });
      // ready again means the ingest subscription is back on the server: a producer that connects
      // now is answered
      nc = await connect({ servers: nats.url, name: 'readiness-test' });
      const answers = await burst(nc, orgId, 20);
      expect(answers.filter((a) => a !== '{"ok":true}')).toEqual([]);
      expect((await sigterm(svc)).code).toBe(0);
    } finally {
      await nc?.close();
      await nats.stop();
    }
  }, 60_000);

  it('SIGTERM: 503 at once and during the drain; requests already received are answered after their commit, later ones find no ' +
    'responder', async () => {
    const nats = await startNatsServer();
    const nc = await connect({ servers: nats.url, name: 'readiness-test' });
    try {
      const { db, orgId } = newDb();
      receiver.set('hang', { hang: true });
      insertWebhooks(db, orgId, [receiver.hook('hang')]);
      // a delivery that hangs holds the drain (at most the delivery timeout): time to watch /readyz
      const svc = await spawnService(db, ['--nats', nats.url, '--no-local-runner', '--delivery-timeout', '4s']);
      expect((await readyz(svc.url)).status).toBe(200);
      const first = startedFact(orgId);
      expect((await ingestRequest(nc, first.subject, first.body, { timeout: 5000 })).string()).toBe('{"ok":true}');
      await waitFor(() => receiver.at('hang').length > 0, 10_000, 'a delivery in flight');

      // producers keep sending, one request after another in each of 8 lanes, across the SIGTERM
      const sent: Array<{ id: string; answer: string }> = [];
      const lane = async () => {
        for (;;) {
          const f = startedFact(orgId);
          let answer: string;
          try {
            answer = (await ingestRequest(nc, f.subject, f.body, { timeout: 5000 })).string();
          } catch (err) {
            answer = `error: ${(err as Error).message}`;
          }
          sent.push({ id: f.id, answer });
          if (answer.startsWith('error')) return;
        }
      };
      const lanes = Promise.all(Array.from({ length: 8 }, lane));
      await waitFor(() => sent.length >= 40, 10_000, 'the producers to be under way');
      // a burst that the NATS server has handed on before the signal (the flush): received, so answered
      const atTerm = burst(nc, orgId, BURST);
      await nc.flush();
      svc.proc.kill('SIGTERM');
      const notReady = await waitFor(
        async () => {
          const r = await readyz(svc.url).catch(() => null);
          return r?.status === 503 ? r : null;
        },
        5_000,
        '/readyz to say 503 after SIGTERM',
      );
      expect(notReady.body).toEqual({ ready: false, reasons: expect.arrayContaining(['shutting down']) });
      await lanes;
      // the ingest drain is done, the delivery drain holds: still not ready, still answering HTTP
      expect((await readyz(svc.url)).status).toBe(503);
      expect((await fetch(`${svc.url}/healthz`)).status).toBe(200);
      expect((await svc.exited).code).toBe(0);

      const answers = sent.map((x) => x.answer);
      expect(await atTerm, 'received before the SIGTERM: answered').toEqual(Array(BURST).fill('{"ok":true}'));
      expect(
        answers.filter((a) => a !== '{"ok":true}' && !/no responders/.test(a)),
        'every request was answered {ok: true} or found no responder: none accepted and left unanswered',
      ).toEqual([]);
      expect(
        answers.filter((a) => /no responders/.test(a)),
        'once drained, a request finds no responder (the producer sends elsewhere)',
      ).toHaveLength(8);
      for (const x of sent.filter((y) => y.answer === '{"ok":true}'))
        expect(committed(db, x.id), `${x.id} answered ok, so committed`).toBe(true);
      console.log(
        `readiness at SIGTERM: ${BURST} sent before the signal answered ok; the producers: ${answers.length - 8} answered ok, then ` +
          `8 found no responder`,
      );
    } finally {
      receiver.set('hang', {});
      await nc.close();
      await nats.stop();
    }
  }, 60_000);
});

describe.skipIf(!HAVE_NATS)('svc worker: the line is a promise', () => {
  it('a fact published the moment `worker ready` is read is delivered', async () => {
    const nats = await startNatsServer();
    const receiver = await startReceiver();
    const nc = await connect({ servers: nats.url, name: 'readiness-test' });
    try {
      const { db, orgId } = newDb();
      insertWebhooks(db, orgId, [receiver.hook('worker')]);
      // the engine delivers nothing itself: only the worker can
      const svc = await spawnService(db, ['--nats', nats.url, '--no-local-runner', '--no-deliver']);
      const worker = await spawnWorker(nats.url, [], { SVC_DATAPLANE_KEY: dataplaneKey(db) });
      const f = startedFact(orgId);
      expect((await ingestRequest(nc, f.subject, f.body, { timeout: 5000 })).string()).toBe('{"ok":true}');
      const got = await waitFor(
        () => receiver.at('worker').find((r) => String(r.json?.subject ?? '').includes(f.id)),
        10_000,
        'the delivery by the worker',
      );
      expect(got.json.type).toMatch(/workflow/);
      expect((await sigterm(worker)).code).toBe(0);
      expect((await sigterm(svc)).code).toBe(0);
    } finally {
      await nc.close();
      await receiver.close();
      await nats.stop();
    }
  }, 60_000);
});
