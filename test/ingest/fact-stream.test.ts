// Durable ingest (CONTRACT 9, NATS mode) over a real nats-server and a real SQLite engine: the gate
// (src/ingest/gate.ts) answers once SVC_FACTS holds a fact, with no engine running; the engine
// (src/ingest/fact-stream.ts) applies what the stream holds once it starts, exactly once across a
// restart (its cursors in its own commits); the engine's verdict reaches the producer when it comes
// in time, and a refusal is recorded as a late refusal; an org with thousands of facts pending does
// not hold another org's fact behind them. The kill -9 ledgers: test/system/durable-ingest*.
import { randomBytes } from 'node:crypto';
import { jetstream, jetstreamManager, type JetStreamClient } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ensureLayout, FACTS_STREAM } from '../../src/bus/nats/jetstream.ts';
import { Readiness } from '../../src/readiness.ts';
import { INBOX_PREFIX } from '../../src/bus/subjects.ts';
import { systemClock } from '../../src/domain/clock.ts';
import { applyFactStream, ORG_QUEUE, type FactStream } from '../../src/ingest/fact-stream.ts';
import { startGate, VERDICT_WAIT_MS, type Gate } from '../../src/ingest/gate.ts';
import { listIngestRejections, recordIngestRejections } from '../../store/ingest-rejections.ts';
import { EngineWorld, logger } from '../helpers/engine.ts';
import { findNatsServer, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.ts';
import { ingestRequest, startedFact } from '../helpers/producer.ts';
import { tmpDir } from '../helpers/service.ts';
import { waitFor } from '../helpers/wait.ts';

const enc = (v: unknown) => new TextEncoder().encode(JSON.stringify(v));

describe.skipIf(findNatsServer() === null)('durable ingest: the gate and the engine applying SVC_FACTS', () => {
  let nats: NatsServerHandle;
  let nc: NatsConnection;
  let js: JetStreamClient;
  const running: Array<{ stop(): Promise<void> } | { drain(): Promise<void> }> = [];
  const worlds: EngineWorld[] = [];

  beforeAll(async () => {
    nats = await startNatsServer({ storeDir: tmpDir('svc-facts-nats-') });
    nc = await connect({ servers: nats.url, inboxPrefix: INBOX_PREFIX.engine });
    await ensureLayout(nc, await jetstreamManager(nc), { replicas: 1 });
    js = jetstream(nc);
  });
  afterEach(async () => {
    for (const r of running.splice(0).reverse()) await ('stop' in r ? r.stop() : r.drain());
    for (const w of worlds.splice(0)) w.close();
  });
  afterAll(async () => {
    await nc?.close();
    await nats?.stop();
  });

  const world = (dbFile = `${tmpDir('svc-facts-db-')}/svc.db`) => {
    const w = new EngineWorld({ dbFile });
    worlds.push(w);
    return w;
  };
  const gate = (w: EngineWorld): Gate => {
    const g = startGate({
      nc,
      logger,
      metrics: w.metrics,
      clock: systemClock,
      gateId: `test_${randomBytes(4).toString('hex')}`,
      inboxPrefix: INBOX_PREFIX.engine,
      orgs: null,
    });
    running.push(g);
    return g;
  };
  const applier = async (w: EngineWorld): Promise<FactStream> => {
    const f = await applyFactStream({
      js,
      nc,
      db: w.db,
      engine: w.engine,
      logger,
      metrics: w.metrics,
      clock: systemClock,
      refused: (rows) => recordIngestRejections(w.db, rows),
    });
    running.push(f);
    return f;
  };
  const send = async (subject: string, body: unknown) => {
    const t0 = performance.now();
    const m = await ingestRequest(nc, subject, enc(body), { timeout: 5000 });
    return { reply: m.json<Record<string, unknown>>(), ms: performance.now() - t0 };
  };
  const workflows = (w: EngineWorld, org: string) =>
    (w.db.prepare('SELECT COUNT(*) AS n FROM workflows WHERE org_id = ?').get(org) as { n: number }).n;

  it('answers ok once the stream holds a fact while no engine runs; the engine applies it when it starts, once across a restart', async () => {
    const dbFile = `${tmpDir('svc-facts-db-')}/svc.db`;
    const w = world(dbFile);
    const org = w.org();
    gate(w);
    const first = Array.from({ length: 5 }, () => startedFact(org));
    for (const f of first) {
      const r = await send(f.natsSubject, f.body);
      expect(r.reply).toEqual({ ok: true });
      // no verdict comes: answered once its wait is over, not held until an engine comes
      expect(r.ms).toBeLessThan(VERDICT_WAIT_MS + 250);
    }
    expect(workflows(w, org)).toBe(0);
    const facts = await applier(w);
    await waitFor(() => workflows(w, org) === 5, 10_000, 'the five facts applied');
    await waitFor(() => facts.pending() === 0, 5000, 'nothing pending');
    // an engine that starts again on the same database applies what came since, and nothing twice
    await facts.stop();
    running.splice(running.indexOf(facts), 1);
    for (const f of Array.from({ length: 3 }, () => startedFact(org)))
      expect((await send(f.natsSubject, f.body)).reply).toEqual({ ok: true });
    const again = await applier(w);
    await waitFor(() => workflows(w, org) === 8, 10_000, 'the three later facts applied');
    await waitFor(() => again.pending() === 0, 5000, 'nothing pending');
    expect(again.watermark).toBeGreaterThanOrEqual(8);
    expect(workflows(w, org)).toBe(8);
  });

  it("answers with the engine's verdict when it comes in time, and records a refusal as a late refusal", async () => {
    const w = world();
    const org = w.org();
    gate(w);
    await applier(w);
    const wf = `wfx_${randomBytes(5).toString('hex')}`;
    const stepFirst = { kind: 'workflow_step', transition: 'started', step: { id: 'st_1', name: 'deploy', idx: 0 } };
    const r = await send(`svc.ingest.${org}.workflows.${wf}`, stepFirst);
    expect(r.reply).toMatchObject({ ok: false, error: expect.stringMatching(/first message of a workflow must carry workflow/) });
    const unknown = {
      kind: 'workflow',
      transition: 'started',
      workflow: { id: wf, type: 'deploy_everything', owner_id: 'i', owner_type: 'installs' },
    };
    expect((await send(`svc.ingest.${org}.workflows.${wf}`, unknown)).reply).toMatchObject({
      ok: true,
      warning: expect.stringMatching(/unknown workflow type deploy_everything/),
    });
    const rows = listIngestRejections(w.db, { orgId: org, keptSinceMs: 0, beforeSeq: 0, limit: 10 });
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ subject: `svc.ingest.${org}.workflows.${wf}`, error: expect.stringMatching(/must carry workflow/) });
    expect(JSON.parse(rows[0].fact)).toEqual(stepFirst);
  });

  it("applies another org's fact while an org has thousands pending, and every one of those once", async () => {
    const w = world();
    const a = w.org();
    const b = w.org();
    const pendingA = ORG_QUEUE * 2 + 500;
    // what a flood left in the stream while no engine ran
    for (let i = 0; i < pendingA; i += 500) {
      await Promise.all(
        Array.from({ length: Math.min(500, pendingA - i) }, () => {
          const f = startedFact(a);
          return js.publish(f.natsSubject.replace('svc.ingest.', 'svc.facts.'), enc(f.body));
        }),
      );
    }
    gate(w);
    const bFacts = Array.from({ length: 3 }, () => startedFact(b));
    for (const f of bFacts) expect((await send(f.natsSubject, f.body)).reply).toEqual({ ok: true });
    await applier(w);
    await waitFor(() => workflows(w, b) === 3, 10_000, "B's facts applied");
    // B's came last in the stream and were applied before A's backlog was
    expect(workflows(w, a)).toBeLessThan(pendingA);
    await waitFor(
      () => workflows(w, a) === pendingA,
      30_000,
      () => `A's ${pendingA} applied (${workflows(w, a)})`,
    );
  });

  // last: it takes SVC_FACTS away, and puts it back
  it('refuses with "not recorded, try again" and says not ready while SVC_FACTS cannot store, then stores again', async () => {
    const w = world();
    const org = w.org();
    const readiness = new Readiness();
    const g = startGate({
      nc,
      logger,
      metrics: w.metrics,
      clock: systemClock,
      gateId: `test_${randomBytes(4).toString('hex')}`,
      inboxPrefix: INBOX_PREFIX.engine,
      orgs: null,
      readiness,
    });
    running.push(g);
    const jsm = await jetstreamManager(nc);
    await jsm.streams.delete(FACTS_STREAM);
    try {
      const f = startedFact(org);
      expect((await send(f.natsSubject, f.body)).reply).toEqual({ ok: false, error: 'not recorded, try again' });
      expect(readiness.state().reasons).toEqual([expect.stringMatching(/^SVC_FACTS does not store facts/)]);
    } finally {
      await ensureLayout(nc, jsm, { replicas: 1 });
    }
    const f = startedFact(org);
    expect((await send(f.natsSubject, f.body)).reply).toEqual({ ok: true });
    expect(readiness.state()).toEqual({ ready: true, reasons: [] });
  });
});
