// Trust on the bus (CONTRACT 5.2, 6.7): only events the engine published are delivered, even on a
// NATS server with no authentication; labels that `match` tests come from the event's own org;
// ingest naming an unknown org stores nothing; and the whole path works with the credentials of
// `svc nats init` (engine, a separate svc worker, a producer of one org).
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, headers, type NatsConnection } from '@nats-io/transport-node';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { DISPATCH_CONSUMER, EVENT_ACK_WAIT_MS, EVENTS_STREAM, REGISTRY_BUCKET, sealHeaders } from '../../src/bus/nats/jetstream.ts';
import { encodeHopBatch } from '../../src/bus/hop.ts';
import { hopSubject } from '../../src/bus/subjects.ts';
import { natsConnectOptions } from '../../src/bus/nats/nats-auth.ts';
import { newDataplaneKey, Seal } from '../../src/bus/seal.ts';
import { encodeRoute, type EventRoute } from '../../src/domain/event-route.ts';
import { resolveDataplaneKey } from '../../src/bus/nats/dataplane-key.ts';
import { openDb } from '../../store/db.ts';
import { createOrg } from '../../store/orgs.ts';
import { findNatsServer, freePort, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.ts';
import { startReceiver, type Receiver } from '../helpers/receiver.ts';
import { children, spawnService, type ChildService } from '../helpers/child-service.ts';
import { apiClient, startService, tmpDir, waitFor, type OrgCreds, type TestService } from '../helpers/service.ts';
import { post } from '../helpers/workflows.ts';
import { BIN } from '../helpers/paths.ts';
import { rid } from '../helpers/ids.ts';
import { ingestRequest } from '../helpers/producer.ts';

type Json = any;

/** An external workflow's `started` fact (CONTRACT 5.2) and the subject of its event. */
function externalStarted(orgId: string, owner = 'inst_ext') {
  const id = rid('wfx');
  return {
    natsSubject: `svc.ingest.${orgId}.workflows.${id}`,
    body: JSON.stringify({
      kind: 'workflow',
      transition: 'started',
      workflow: { id, type: 'provision', owner_id: owner, owner_type: 'installs' },
    }),
    ceSubject: `${orgId}/workflow/${id}/started`,
  };
}

/** A CloudEvent as an attacker would write it, for a workflow of the org. */
function forgedEvent(orgId: string) {
  const wf = rid('wf_forged');
  const body = JSON.stringify({
    specversion: '1.0',
    id: randomUUID(),
    type: 'com.svc.workflow.lifecycle.v1',
    source: '//evil/ctl-api',
    time: new Date().toISOString(),
    subject: `${orgId}/workflow/${wf}/started`,
    datacontenttype: 'application/json',
    svcorgid: orgId,
    svckind: 'workflow',
    svctransition: 'started',
    interests: ['resource:installs', 'op:installs.provision', 'event:lifecycle.started'],
    data: {
      kind: 'workflow',
      transition: 'started',
      org_id: orgId,
      workflow: { id: wf, type: 'provision', owner_id: 'inst_x', owner_type: 'installs' },
    },
  });
  const route: EventRoute = {
    org: orgId,
    type: 'com.svc.workflow.lifecycle.v1',
    resource: 'installs',
    op: 'provision',
    event: 'lifecycle.started',
    install: null,
    component: null,
    action: null,
    rev: 0,
  };
  const id = JSON.parse(body).id as string;
  const encodedRoute = encodeRoute(route);
  // as the relay would carry it: a batch of this one event on the durable hop (src/bus/hop.ts)
  const batch = encodeHopBatch([{ id, route: encodedRoute, body }]);
  return {
    id,
    wf,
    body,
    batch,
    route: encodedRoute,
    natsSubject: `svc.events.${orgId}.workflow.${wf}.started`,
    ceSubject: `${orgId}/workflow/${wf}/started`,
  };
}

async function metric(url: string, name: string, labels: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name}{${labels}}`));
  return line ? Number(line.split(' ').pop()) : 0;
}

describe.skipIf(findNatsServer() === null)("only the engine's events are delivered (NATS without authentication)", () => {
  let nats: NatsServerHandle;
  let svc: TestService;
  let rx: Receiver;
  let nc: NatsConnection;
  let org: OrgCreds;

  beforeAll(async () => {
    nats = await startNatsServer();
    rx = await startReceiver();
    svc = await startService({ natsUrl: nats.url });
    org = svc.createOrg('trust');
    await post(svc.api(org), '/v1/orgs/current/webhooks', { webhook_url: rx.hook('all') });
    nc = await connect({ servers: nats.url, name: 'attacker' });
  });
  afterAll(async () => {
    await nc?.close();
    await svc?.stop();
    await rx?.close();
    await nats?.stop();
  });

  it(
    'plain and JetStream publishes on the durable hop are dropped and counted, and one on svc.events.> reaches no webhook; a ' +
      'genuine event after them is delivered',
    async () => {
      const js = jetstream(nc);
      const forged0 = await metric(svc.url, 'svc_events_dropped_total', 'reason="forged"');
      const attempts: Array<{ ceSubject: string }> = [];

      // 0. a plain publish where observers listen (CONTRACT 5.2): no stream keeps it, no data plane takes it
      const observed = forgedEvent(org.org_id);
      nc.publish(observed.natsSubject, observed.body);
      // 1. a plain publish on the hop subject, captured by the stream
      const plain = forgedEvent(org.org_id);
      nc.publish(hopSubject, plain.batch);
      attempts.push(plain);
      // 2. a JetStream publish with a seal made up
      const madeUp = forgedEvent(org.org_id);
      await js.publish(hopSubject, madeUp.batch, { msgID: madeUp.id, headers: sealHeaders('AAAA') });
      attempts.push(madeUp);
      // 3. sealed, but with another key than the engine's
      const otherKey = forgedEvent(org.org_id);
      await js.publish(hopSubject, otherKey.batch, {
        msgID: otherKey.id,
        headers: sealHeaders(new Seal(newDataplaneKey()).sealHop(otherKey.id, otherKey.batch, Date.now())),
      });
      attempts.push(otherKey);
      // 4. sealed with the engine's key, then the body changed (a captured batch, tampered with)
      const key = (() => {
        const db = openDb(svc.db);
        try {
          return resolveDataplaneKey(db, null);
        } finally {
          db.close();
        }
      })();
      const tampered = forgedEvent(org.org_id);
      const seal = new Seal(key).sealHop(tampered.id, tampered.batch, Date.now());
      await js.publish(hopSubject, Buffer.from(tampered.batch.toString().replace('//evil/ctl-api', '//evil/ctl-apj')), {
        msgID: tampered.id,
        headers: sealHeaders(seal),
      });
      attempts.push(tampered);
      // 5. no seal at all, but a JetStream publish
      const bare = forgedEvent(org.org_id);
      const h = headers();
      h.set('X-Anything', '1');
      await js.publish(hopSubject, bare.batch, { msgID: bare.id, headers: h });
      attempts.push(bare);
      // the control: the engine's key and the untouched batch are delivered (the check is the seal)
      const control = forgedEvent(org.org_id);
      await js.publish(hopSubject, control.batch, {
        msgID: control.id,
        headers: sealHeaders(new Seal(key).sealHop(control.id, control.batch, Date.now())),
      });

      // a genuine fact, reported by a producer after all of them
      const fact = externalStarted(org.org_id);
      const reply = await ingestRequest(nc, fact.natsSubject, fact.body, { timeout: 5000 });
      expect(reply.json()).toEqual({ ok: true });

      await waitFor(() => rx.subjects('all').includes(fact.ceSubject), 10_000, 'the genuine event');
      await waitFor(() => rx.subjects('all').includes(control.ceSubject), 10_000, 'the control event sealed with the engine key');
      await waitFor(
        async () => (await metric(svc.url, 'svc_events_dropped_total', 'reason="forged"')) - forged0 >= attempts.length,
        10_000,
        'the drops counted',
      );
      expect((await metric(svc.url, 'svc_events_dropped_total', 'reason="forged"')) - forged0).toBe(attempts.length);
      for (const a of [...attempts, observed]) expect(rx.subjects('all'), a.ceSubject).not.toContain(a.ceSubject);
      // dropped for good: nothing left pending on the consumer (a term the server ignored would keep
      // them pending until the ack wait, then hand them out again, counted again each time)
      const jsm = await jetstreamManager(nc);
      await waitFor(
        async () => (await jsm.consumers.info(EVENTS_STREAM, DISPATCH_CONSUMER)).num_ack_pending === 0,
        EVENT_ACK_WAIT_MS / 2,
        'the forged events terminated',
      );
    },
  );

  it('a producer naming an event subject as its reply gets no answer there (the engine answers on inboxes only)', async () => {
    const fact = externalStarted(org.org_id);
    const victim = `svc.events.${org.org_id}.workflow.wf_reply.started`;
    const seen: string[] = [];
    const sub = nc.subscribe(victim, { callback: (_e, m) => void seen.push(m.string()) });
    nc.publish(fact.natsSubject, fact.body, { reply: victim });
    await waitFor(() => rx.subjects('all').includes(fact.ceSubject), 10_000, 'the fact recorded and delivered');
    await nc.flush();
    expect(seen).toEqual([]);
    sub.unsubscribe();
  });

  it(
    'a registry entry put back after its webhook was deleted is refused: the next event does not go to it, ' + 'counted stale_registry',
    async () => {
      const api = svc.api(org);
      const created = await api.post('/v1/orgs/current/webhooks', { webhook_url: rx.hook('stale'), secret: 'whsec_c3RhbGUtc2VjcmV0' });
      expect(created.status, created.text).toBe(201);
      const key = `${org.org_id}.${created.body.webhook_id}`;
      const kv = await new Kvm(nc).open(REGISTRY_BUCKET);
      const saved = await waitFor(async () => (await kv.get(key))?.value ?? null, 10_000, 'the entry replicated');
      const stale0 = await metric(svc.url, 'svc_events_dropped_total', 'reason="stale_registry"');
      expect((await api.del(`/v1/orgs/current/webhooks/${created.body.webhook_id}`)).status).toBe(204);
      await waitFor(
        async () => {
          const now = (await kv.get(key))?.value;
          return now !== undefined && Buffer.compare(Buffer.from(now), Buffer.from(saved)) !== 0;
        },
        10_000,
        'the tombstone replicated',
      );
      await kv.put(key, saved); // the old value, as it was sealed: it opens with the key
      await waitFor(
        async () => (await metric(svc.url, 'svc_events_dropped_total', 'reason="stale_registry"')) > stale0,
        10_000,
        'the stale entry refused and counted',
      );
      const fact = externalStarted(org.org_id);
      expect((await ingestRequest(nc, fact.natsSubject, fact.body, { timeout: 5000 })).json()).toEqual({ ok: true });
      await waitFor(() => rx.subjects('all').includes(fact.ceSubject), 10_000, 'the next event delivered to the webhook that exists');
      await svc.settled(10_000);
      expect(rx.subjects('stale')).toEqual([]);
    },
  );
});

describe('labels and orgs (CONTRACT 5.2, 6.7)', () => {
  let svc: TestService;
  let rx: Receiver;

  beforeAll(async () => {
    rx = await startReceiver();
    svc = await startService();
  });
  afterAll(async () => {
    await svc?.stop();
    await rx?.close();
  });

  it("another org's install id has no labels for this org: a selector on them matches nothing, an id filter still does", async () => {
    const a = svc.createOrg('org-a');
    const b = svc.createOrg('org-b');
    const apiA = svc.api(a);
    const apiB = svc.api(b);
    const app = await post(apiA, '/v1/apps', { name: 'a-app' });
    await post(apiA, `/v1/apps/${app.app_id}/configs`, { components: [{ name: 'api' }] });
    const install = await post(apiA, '/v1/installs', { app_id: app.app_id, name: 'a-1', labels: { secret: 'orange' } });

    // org B subscribes by A's labels, by A's install id, and org-wide
    await post(apiB, '/v1/orgs/current/webhooks', {
      webhook_url: rx.hook('b-selector'),
      match: { installs: { selector: { match_labels: { secret: 'orange' } } } },
    });
    await post(apiB, '/v1/orgs/current/webhooks', { webhook_url: rx.hook('b-ids'), match: { installs: { ids: [install.install_id] } } });
    await post(apiB, '/v1/orgs/current/webhooks', { webhook_url: rx.hook('b-all') });

    // org B's producer reports a workflow whose owner is A's install
    const probe = externalStarted(b.org_id, install.install_id);
    const reply = await svc.server.bus.request(probe.natsSubject, probe.body, { timeoutMs: 5000 });
    expect(reply.json()).toEqual({ ok: true });

    await waitFor(() => rx.subjects('b-all').includes(probe.ceSubject), 5000, 'the org-wide delivery');
    await waitFor(() => rx.subjects('b-ids').includes(probe.ceSubject), 5000, 'the id-filter delivery');
    // the org-wide and id deliveries came first (same event): the selector one would have come with them
    await svc.server.bus.flush();
    expect(rx.subjects('b-selector')).toEqual([]);
    for (const r of rx.all) expect(r.raw.toString()).not.toContain('orange');
  });

  it(
    "external workflow ids are the org's own: another org's id (external or the engine's) is simply a different workflow, and " +
      'taking it first changes nothing for its owner',
    async () => {
      const a = svc.createOrg('ids-a');
      const b = svc.createOrg('ids-b');
      const apiA = svc.api(a);
      const apiB = svc.api(b);
      await post(apiA, '/v1/orgs/current/webhooks', { webhook_url: rx.hook('ids-a') });
      await post(apiB, '/v1/orgs/current/webhooks', { webhook_url: rx.hook('ids-b') });
      const report = (orgId: string, id: string, transition: string, owner = 'inst_x') =>
        svc.server.bus
          .request(
            `svc.ingest.${orgId}.workflows.${id}`,
            JSON.stringify({
              kind: 'workflow',
              transition,
              workflow: { id, type: 'sync_secrets', owner_id: owner, owner_type: 'installs' },
            }),
            { timeoutMs: 5000 },
          )
          .then((r) => r.json() as Json);

      // B reports an id first; A then reports the same id: two workflows, each delivered to its own org under that id
      const shared = rid('wfx');
      expect(await report(b.org_id, shared, 'started')).toEqual({ ok: true });
      expect(await report(a.org_id, shared, 'started')).toEqual({ ok: true });
      expect(await report(a.org_id, shared, 'succeeded')).toEqual({ ok: true });
      await waitFor(() => rx.subjects('ids-a').includes(`${a.org_id}/workflow/${shared}/succeeded`), 5000, "A's workflow finished");
      await waitFor(() => rx.subjects('ids-b').includes(`${b.org_id}/workflow/${shared}/started`), 5000, "B's workflow started");
      expect((await apiA.get(`/v1/workflows/${shared}`)).body).toMatchObject({ workflow_id: shared, status: 'succeeded', external: true });
      expect((await apiB.get(`/v1/workflows/${shared}`)).body).toMatchObject({ workflow_id: shared, status: 'started', external: true });

      // B probes an id of A's engine workflow: no "run by the engine" answer; B gets a workflow of its own
      const app = await post(apiA, '/v1/apps', { name: rid('ids-app') });
      const cfg = await post(apiA, `/v1/apps/${app.app_id}/configs`, { components: [{ name: 'api' }] });
      const install = await post(apiA, '/v1/installs', { app_id: app.app_id, name: rid('ids-i'), app_config_id: cfg.app_config_id });
      const engineWf = (await apiA.get(`/v1/installs/${install.install_id}/workflows`)).body[0];
      expect(await report(b.org_id, engineWf.workflow_id, 'failed')).toEqual({ ok: true });
      expect((await apiB.get(`/v1/workflows/${engineWf.workflow_id}`)).body).toMatchObject({ external: true, status: 'failed' });
      const mine = (await apiA.get(`/v1/workflows/${engineWf.workflow_id}`)).body;
      expect(mine).toMatchObject({ external: false, type: 'provision' });
      expect(mine.status).not.toBe('failed');
      // the same probe from A itself is still refused (CONTRACT 5.2)
      expect((await report(a.org_id, engineWf.workflow_id, 'failed')).ok).toBe(false);
    },
  );

  it('ingest naming an org that does not exist is {ok: false, error: "unknown org"} and stores nothing', async () => {
    const ghost = 'org_does_not_exist';
    const db = () => openDb(svc.db);
    const count = () => {
      const h = db();
      try {
        return ['workflows', 'steps', 'runners', 'outbox'].map(
          (t) => (h.prepare(`SELECT COUNT(*) AS n FROM ${t} WHERE org_id = ?`).get(ghost) as { n: number }).n,
        );
      } finally {
        h.close();
      }
    };
    const before = await metric(svc.url, 'svc_ingest_messages_total', 'result="invalid"');
    for (const [subject, body] of [
      [
        `svc.ingest.${ghost}.workflows.wf_ghost`,
        { kind: 'workflow', transition: 'started', workflow: { id: 'wf_ghost', type: 'provision', owner_id: 'i', owner_type: 'installs' } },
      ],
      [`svc.ingest.${ghost}.runners.run_ghost`, { type: 'heartbeat', process: 'running' }],
      [`svc.ingest.${ghost}.health.inst_ghost`, { component_id: 'c', verdict: 'degraded' }],
      [`svc.ingest.${ghost}.jobs.job_ghost`, { status: 'started' }],
    ] as const) {
      const r = await svc.server.bus.request(subject, JSON.stringify(body), { timeoutMs: 5000 });
      expect(r.json(), subject).toEqual({ ok: false, error: 'unknown org' });
    }
    expect(count()).toEqual([0, 0, 0, 0]);
    expect((await metric(svc.url, 'svc_ingest_messages_total', 'result="invalid"')) - before).toBe(4);
  });
});

describe.skipIf(findNatsServer() === null)('with the credentials of svc nats init: engine, a svc worker, a producer', () => {
  let tmp: string;
  let nats: NatsServerHandle;
  let rx: Receiver;
  let serve: ChildService;
  let worker: ChildService;
  let producer: NatsConnection;
  let org: OrgCreds;

  const cli = (args: string[]) =>
    new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
      const p = spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      p.stdout.on('data', (d) => (stdout += d));
      p.stderr.on('data', (d) => (stderr += d));
      p.on('exit', (code) => resolve({ code, stdout, stderr }));
    });

  beforeAll(async () => {
    tmp = tmpDir('svc-trust-creds-');
    const dir = path.join(tmp, 'nats');
    const port = await freePort();
    const init = await cli(['nats', 'init', '--dir', dir, '--port', String(port)]);
    expect(init.code, init.stderr).toBe(0);
    nats = await startNatsServer({ config: path.join(dir, 'nats.conf') });
    rx = await startReceiver();
    const db = path.join(tmp, 'svc.db');
    const h = openDb(db);
    const created = createOrg(h, 'creds');
    h.close();
    org = { org_id: created.org.org_id, api_token: created.api_token };
    serve = await spawnService(db, [
      '--nats',
      nats.url,
      '--nats-creds',
      path.join(dir, 'engine.creds'),
      '--no-deliver',
      '--no-local-runner',
    ]);
    worker = await spawnWorker(nats.url, path.join(dir, 'worker.creds'));
    const creds = await cli(['nats', 'creds', '--dir', dir, '--org', org.org_id, '--db', db]);
    expect(creds.code, creds.stderr).toBe(0);
    const file = path.join(tmp, 'producer.creds');
    fs.writeFileSync(file, creds.stdout, { mode: 0o600 });
    producer = await connect({
      ...natsConnectOptions({ servers: [nats.url], name: 'producer', credsFile: file, role: 'producer', org: org.org_id }),
      reconnect: false,
    });
  });
  afterAll(async () => {
    await producer?.close();
    for (const c of children) c.kill('SIGKILL');
    await rx?.close();
    await nats?.stop();
  });

  async function spawnWorker(url: string, creds: string): Promise<ChildService> {
    const proc = spawn(process.execPath, [BIN, 'worker', '--nats', url, '--nats-creds', creds, '--allow-private-targets'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.add(proc);
    let out = '';
    proc.stdout.on('data', (d) => (out += d));
    proc.stderr.on('data', (d) => (out += d));
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) =>
      proc.once('exit', (code, signal) => r({ code, signal })),
    );
    await waitFor(() => out.includes('worker ready'), 20_000, `svc worker to be ready:\n${out}`);
    return { proc, url, exited, output: () => out };
  }

  it(
    "a producer's fact reaches the webhook through the engine and a separate worker, signed; the engine logged no warning about " +
      'credentials',
    async () => {
      await post(apiClient(serve.url, org), '/v1/orgs/current/webhooks', {
        webhook_url: rx.hook('creds'),
        secret: 'whsec_dHJ1c3QtY3JlZHMtc2VjcmV0',
      });
      const fact = externalStarted(org.org_id);
      const reply = await producer.request(fact.natsSubject, fact.body, { timeout: 5000 });
      expect(reply.json()).toEqual({ ok: true });
      await waitFor(() => rx.subjects('creds').includes(fact.ceSubject), 10_000, 'the delivery through the worker');
      const got = rx.at('creds').find((r) => r.json?.subject === fact.ceSubject)!;
      expect(got.headers['webhook-signature']).toMatch(/^v1,/);
      expect(serve.output()).not.toContain('no --nats-creds');
      expect(worker.output()).not.toContain('no --nats-creds');
    },
  );
});
