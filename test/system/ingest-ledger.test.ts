// Durable ingest through kill -9 of the engine (CONTRACT 9, issue 51), on one nats-server:
// - the ledger (test/helpers/ingest-ledger.ts): a fact every 20 ms for 30 s, svc serve killed at 5 s
//   and started again at 15 s, a svc worker beside it; every fact answered ok and applied once;
// - what only the engine can judge, sent while no engine runs, is answered ok by the worker's gate
//   and refused late: GET /v1/ingest/rejections, svc_ingest_messages_total{result="invalid"}.
// The 3-server variant is test/system/ingest-ledger-cluster.test.ts (in the serial set).
import { connect } from '@nats-io/transport-node';
import { describe, expect, it } from 'vitest';
import { findNatsServer, startNatsServer } from '../helpers/nats-server.ts';
import { expectIngestLedger, kill9, runIngestLedger, tracked } from '../helpers/ingest-ledger.ts';
import { dataplaneKey, spawnService, spawnWorker } from '../helpers/child-service.ts';
import { apiClient, newDbWithOrg, waitFor } from '../helpers/service.ts';
import { ingestRequest } from '../helpers/producer.ts';
import { metric } from '../helpers/ledger.ts';
import { rid } from '../helpers/ids.ts';
import { get, post, waitWf } from '../helpers/workflows.ts';

type Json = any;

describe.skipIf(findNatsServer() === null)('durable ingest, NATS mode, one server', () => {
  it('kill -9 of svc serve at 5 s, started again at 15 s, a worker beside it: every fact answered ok and applied once', async (ctx) => {
    const nats = await startNatsServer();
    ctx.onTestFinished(() => nats.stop());
    expectIngestLedger(await runIngestLedger(ctx, { name: 'one server', natsUrl: nats.url }));
  }, 90_000);

  it("while no engine runs the worker's gate answers: invalid facts refused at once, a fact naming the engine's own workflow " +
    'stored (ok), and refused late once the engine is back (GET /v1/ingest/rejections, the invalid count)', async (ctx) => {
    const t = tracked(ctx);
    const nats = await startNatsServer();
    t.onEnd(() => nats.stop());
    const { db, org } = newDbWithOrg('late-refusal');
    const O = org.org_id;
    const args = ['--nats', nats.url];
    const svc = t.track(await spawnService(db, args));
    t.track(await spawnWorker(nats.url, [], { SVC_DATAPLANE_KEY: dataplaneKey(db) }));
    const api = apiClient(svc.url, org);
    // a workflow the engine started: an install's provision, run by the local runner
    const app = await post(api, '/v1/apps', { name: rid('app') });
    await post(api, `/v1/apps/${app.app_id}/configs`, {
      sandbox: { size: 'small' },
      components: [{ name: 'api', values: { image: 'a:1' } }],
    });
    const install = await post(api, '/v1/installs', { app_id: app.app_id, name: rid('inst') });
    const [provision] = await get(api, `/v1/installs/${install.install_id}/workflows`);
    expect(provision.type).toBe('provision');
    const W = provision.workflow_id;
    await waitWf(api, W, 30_000);
    const startedEvents = async (a: typeof api) =>
      (await get(a, `/v1/events?subject_prefix=${encodeURIComponent(`${O}/workflow/${W}/`)}&limit=500`)).data.length;
    const before = await startedEvents(api);
    expect(before).toBeGreaterThan(0);

    await kill9(svc);
    const nc = await connect({ servers: nats.url, name: 'late-refusal-producer' });
    t.onEnd(() => nc.close());
    const ask = async (subject: string, body: unknown) => {
      const t0 = Date.now();
      const m = await ingestRequest(nc, subject, JSON.stringify(body), { timeout: 5000 });
      return { reply: m.json<Json>(), ms: Date.now() - t0 };
    };
    // what the gate checks alone is still refused at once: no engine runs that could answer it (a
    // single request's time is no p99; the bound says only that nothing waited for an engine)
    const bad = await ask(`svc.ingest.${O}.workflows.${rid('wfx')}`, { kind: 'workflow', transition: 'exploded' });
    expect(bad.reply.ok, JSON.stringify(bad.reply)).toBe(false);
    expect(bad.ms).toBeLessThan(1000);
    const stranger = await ask(`svc.ingest.org_${rid('x')}.workflows.${rid('wfx')}`, {
      kind: 'workflow',
      transition: 'started',
      workflow: { id: 'wf_x', type: 'sync_secrets', owner_id: 'inst_x', owner_type: 'installs' },
    });
    // an org the worker's directory does not have is looked for again for 2.5 s (it may be a moment old), then refused
    expect(stranger.reply).toEqual({ ok: false, error: 'unknown org' });
    // what only the engine can judge is stored and answered ok
    const fact = {
      kind: 'workflow',
      transition: 'started',
      workflow: { id: W, type: 'sync_secrets', owner_id: install.install_id, owner_type: 'installs' },
    };
    const stored = await ask(`svc.ingest.${O}.workflows.${W}`, fact);
    expect(stored.reply).toEqual({ ok: true });
    expect(stored.ms).toBeLessThan(1000);
    console.log(
      `while no engine ran: an invalid fact refused in ${bad.ms} ms, the engine's workflow stored and answered in ${stored.ms} ms`,
    );

    const back = t.track(await spawnService(db, args));
    const api2 = apiClient(back.url, org);
    const rejected = await waitFor(
      async () => (await get(api2, '/v1/ingest/rejections')).data.find((r: Json) => r.subject === `svc.ingest.${O}.workflows.${W}`),
      15_000,
      'the late refusal listed',
    );
    expect(rejected.error).toContain(`workflow ${W} is run by the engine`);
    expect(rejected.fact).toEqual(fact);
    expect(Date.parse(rejected.received_at)).toBeGreaterThan(0);
    // counted by the engine that refused it (a new process: nothing else invalid reached it)
    expect(await metric(back.url, 'svc_ingest_messages_total', { result: 'invalid' })).toBe(1);
    // and nothing of it applied: the provision's events are as they were
    expect(await startedEvents(api2)).toBe(before);
    expect((await get(api2, `/v1/workflows/${W}`)).type).toBe('provision');
  }, 60_000);
});
