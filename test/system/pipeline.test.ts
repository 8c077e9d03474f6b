// Integration tests of the event pipeline (CONTRACT 5, 6; spec 3, 6), end to end through a real
// svc (HTTP, SQLite, engine, bus, dispatch, delivery) in both bus modes: the in-process bus and a
// real nats-server with JetStream. Producers and the external runner are played by this file:
// in memory mode through the server's own bus, in NATS mode through a separate NATS connection.
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Bus } from '../../src/bus/bus.ts';
import { ManualClock } from '../helpers/clock.ts';
import { sign, verify } from '../../src/delivery/signing.ts';
import { findNatsServer, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.ts';
import { startReceiver, type Received, type Receiver } from '../helpers/receiver.ts';
import { startService, waitFor, type ApiClient, type OrgCreds, type TestService } from '../helpers/service.ts';
import type { Job } from '../helpers/fake-runner.ts';
import { rid } from '../helpers/ids.ts';
import { ingestRequest } from '../helpers/producer.ts';
import type { DeliveryStatusBook } from '../../src/outcomes/status-book.ts';

type Json = any;

/** the delivery watchdog's events (CONTRACT 4.1), about the failing receivers of these tests */
const WATCHDOG = 'com.svc.webhook.delivery.v1';

// ---------------------------------------------------------------------------------------------
// producers: the same protocol over either bus

interface Producer {
  /** A NATS request (or its in-process equivalent); resolves with the parsed answer. */
  request(subject: string, body: unknown): Promise<Json>;
  /** Subscribe to a subject; the handler gets the parsed payload. */
  subscribe(subject: string, fn: (payload: Json) => void): Promise<() => void>;
  close(): Promise<void>;
}

const encode = (body: unknown) => (typeof body === 'string' ? body : JSON.stringify(body));

function memoryProducer(bus: Bus): Producer {
  return {
    async request(subject, body) {
      const m = await bus.request(subject, encode(body), { timeoutMs: 5000 });
      return m.json();
    },
    async subscribe(subject, fn) {
      const sub = bus.subscribe(subject, (m) => fn(m.json()));
      return () => sub.unsubscribe();
    },
    async close() {},
  };
}

async function natsProducer(url: string): Promise<Producer> {
  const nc: NatsConnection = await connect({ servers: url, name: 'pipeline-test-producer' });
  return {
    async request(subject, body) {
      const m = await ingestRequest(nc, subject, encode(body), { timeout: 5000 });
      return m.json();
    },
    async subscribe(subject, fn) {
      const sub = nc.subscribe(subject, {
        callback: (err, m) => {
          if (!err) fn(m.json());
        },
      });
      await nc.flush(); // the server knows the subscription before anything is sent to it
      return () => sub.unsubscribe();
    },
    async close() {
      await nc.drain();
    },
  };
}

/**
 * An external runner for one org (svc runs with localRunner: false): answers every job on
 * svc.jobs.<org>.> with started then succeeded; with `repeat`, sends each of them twice.
 */
async function externalRunner(p: Producer, orgId: string, opts: { repeat?: boolean } = {}) {
  const jobs: Job[] = [];
  const replies: Json[] = [];
  const held = new Set<string>();
  const stop = await p.subscribe(`svc.jobs.${orgId}.>`, (job: Job) => {
    if (held.has(job.job_id)) return; // a job sent again (CONTRACT 5.2)
    held.add(job.job_id);
    jobs.push(job);
    void (async () => {
      const subject = `svc.ingest.${orgId}.jobs.${job.job_id}`;
      for (const status of ['started', 'succeeded']) {
        for (let i = 0; i < (opts.repeat ? 2 : 1); i++) replies.push(await p.request(subject, { status }));
      }
    })();
  });
  return { jobs, replies, stop };
}

// ---------------------------------------------------------------------------------------------
// fixtures

interface Provisioned {
  install: Json;
  api: Json; // the component named api
  worker: Json;
  provision: Json; // GET /v1/workflows/<provision workflow>
}

async function createHook(api: ApiClient, body: Json): Promise<Json> {
  const r = await api.post('/v1/orgs/current/webhooks', body);
  expect(r.status, r.text).toBe(201);
  return r.body;
}

async function provisionInstall(api: ApiClient, labels: Record<string, string> = { env: 'prod' }): Promise<Provisioned> {
  const app = await api.post('/v1/apps', { name: rid('app') });
  expect(app.status, app.text).toBe(201);
  const cfg = await api.post(`/v1/apps/${app.body.app_id}/configs`, {
    components: [
      { name: 'api', labels: { tier: 'web' } },
      { name: 'worker', labels: { tier: 'bg' } },
    ],
  });
  expect(cfg.status, cfg.text).toBe(201);
  const ins = await api.post('/v1/installs', { app_id: app.body.app_id, name: rid('ins'), labels });
  expect(ins.status, ins.text).toBe(201);
  const installId: string = ins.body.install_id;
  const wfs = await api.get(`/v1/installs/${installId}/workflows`);
  const wfId: string = wfs.body.find((w: Json) => w.type === 'provision').workflow_id;
  const provision = await waitFor(
    async () => {
      const r = await api.get(`/v1/workflows/${wfId}`);
      return r.body.status === 'succeeded' ? r.body : null;
    },
    10_000,
    'the provision workflow to succeed',
  );
  const install = (await api.get(`/v1/installs/${installId}`)).body;
  const byName = (n: string) => install.components.find((c: Json) => c.name === n);
  return { install, api: byName('api'), worker: byName('worker'), provision };
}

/** Subjects of every event of a provision workflow (started and succeeded of it and each step). */
function provisionSubjects(org: string, wf: Json, stepFilter: (s: Json) => boolean = () => true): string[] {
  const out: string[] = [];
  for (const s of wf.steps.filter(stepFilter)) {
    out.push(
      `${org}/workflow_step/${wf.workflow_id}/${s.step_id}/started`,
      `${org}/workflow_step/${wf.workflow_id}/${s.step_id}/succeeded`,
    );
  }
  return out;
}

const sorted = (xs: string[]) => [...xs].sort();

/**
 * Wait until `name` got at least n requests, then until svc has delivered everything it
 * committed: extra deliveries (a duplicate, a retry, an event that should not match) would show.
 */
async function settle(svc: TestService, rx: Receiver, name: string, n: number): Promise<Received[]> {
  await waitFor(() => rx.at(name).length >= n, 10_000, `${n} deliveries to ${name} (have ${rx.at(name).length})`);
  await svc.settled();
  return rx.at(name);
}

// ---------------------------------------------------------------------------------------------

const modes = ['memory', 'nats'] as const;
const haveNats = findNatsServer() !== null;

describe.each(modes)('event pipeline on the %s bus', (mode) => {
  const skip = mode === 'nats' && !haveNats;
  let nats: NatsServerHandle | null = null;
  let svc: TestService;
  let producer: Producer;
  let rx: Receiver;

  beforeAll(async () => {
    if (skip) return;
    if (mode === 'nats') nats = await startNatsServer();
    svc = await startService({
      natsUrl: nats?.url ?? null,
      localRunner: false, // this file plays the runners
      deliveryTimeoutMs: 3000,
    });
    expect(svc.server.bus.kind).toBe(mode);
    producer = mode === 'nats' ? await natsProducer(nats!.url) : memoryProducer(svc.server.bus);
    rx = await startReceiver();
  });

  afterAll(async () => {
    if (skip) return;
    await producer?.close();
    await svc?.stop();
    await rx?.close();
    await nats?.stop();
  });

  /** A fresh org, its API client and an external runner answering its jobs. */
  async function freshOrg(opts: { repeat?: boolean } = {}) {
    const org: OrgCreds = svc.createOrg(rid('org'));
    const runner = await externalRunner(producer, org.org_id, opts);
    return { org, O: org.org_id, api: svc.api(org), runner };
  }

  const wfSubject = (O: string, wf: string, tr: string) => `${O}/workflow/${wf}/${tr}`;
  const stepSubject = (O: string, wf: string, st: string, tr: string) => `${O}/workflow_step/${wf}/${st}/${tr}`;

  /** Report one external workflow transition (CONTRACT 5.2) and expect {ok: true}. */
  async function ext(O: string, msg: Json, wfId: string = msg.workflow?.id): Promise<Json> {
    const r = await producer.request(`svc.ingest.${O}.workflows.${wfId}`, msg);
    expect(r, JSON.stringify(msg)).toEqual({ ok: true });
    return r;
  }

  /** An external workflow with `n` steps run to success: 2 + 2n events. Returns their subjects. */
  async function externalRun(O: string, n: number, opts: { owner?: string } = {}): Promise<string[]> {
    const workflow = { id: rid('wfx'), type: 'manual_deploy', owner_id: opts.owner ?? 'inst_not_known', owner_type: 'installs' };
    const subjects = [wfSubject(O, workflow.id, 'started')];
    await ext(O, { kind: 'workflow', transition: 'started', workflow });
    for (let i = 0; i < n; i++) {
      const step = {
        id: `st_${i}`,
        name: `deploy c${i}`,
        idx: i,
        target_type: 'install_deploys',
        component_id: `cmp_${i}`,
        execution_type: 'system',
      };
      await ext(O, { kind: 'workflow_step', transition: 'started', step }, workflow.id);
      await ext(O, { kind: 'workflow_step', transition: 'succeeded', step }, workflow.id);
      subjects.push(stepSubject(O, workflow.id, step.id, 'started'), stepSubject(O, workflow.id, step.id, 'succeeded'));
    }
    await ext(O, { kind: 'workflow', transition: 'succeeded' }, workflow.id);
    subjects.push(wfSubject(O, workflow.id, 'succeeded'));
    return subjects;
  }

  it.skipIf(skip)('matching matrix: each webhook gets exactly the subjects its interests and match admit', async () => {
    const { O, api } = await freshOrg();
    const EXT_OWNER = 'inst_external_owner';
    const hooks: Record<string, Json> = {
      all: { interests: { all_events: true } },
      installs_completion: { interests: { resources: { installs: { outcome: 'completion' } } } },
      deploy_web: {
        interests: { resources: { components: { ops: ['deploy'] } } },
        match: { components: { selector: { match_labels: { tier: 'web' } } } },
      },
      teardown_and_health: { interests: { resources: { components: { ops: ['teardown'], component_health: true } } } },
      runner_inactive: { interests: { resources: { runners: { ops: ['inactive'] } } } },
      runner_provision: { interests: { resources: { runners: { ops: ['provision'] } } } },
      runners_failures: { interests: { resources: { runners: { outcome: 'failures' } } } },
      install_degraded: { interests: { resources: { installs: { outcome: 'none', install_degraded: true } } } },
      sandboxes: { interests: { resources: { sandboxes: {} } } },
      sandboxes_failures: { interests: { resources: { sandboxes: { outcome: 'failures' } } } },
      env_prod: { interests: { all_events: true }, match: { installs: { selector: { match_labels: { env: 'prod' } } } } },
      env_staging: { interests: { all_events: true }, match: { installs: { selector: { match_labels: { env: 'staging' } } } } },
      external_owner: { interests: { all_events: true }, match: { installs: { ids: [EXT_OWNER] } } },
      web_components: {
        interests: { all_events: true },
        match: { components: { selector: { match_labels: { tier: '*' } } }, actions: { ids: ['act_none'] } },
      },
      any_action: { interests: { all_events: true }, match: { actions: {} } },
    };
    for (const [name, sub] of Object.entries(hooks)) await createHook(api, { webhook_url: rx.hook(`${O}-${name}`), ...sub });

    // 1. one provision (10 events: the workflow and its 4 steps, started + succeeded)
    const { install, api: apiComp, provision } = await provisionInstall(api);
    const I = install.install_id;
    const P = provision.workflow_id;
    expect(provision.steps.map((s: Json) => s.name)).toEqual(['provision runner', 'provision sandbox', 'deploy api', 'deploy worker']);
    const stepNamed = (n: string) => provision.steps.find((s: Json) => s.name === n);
    const provisionAll = [wfSubject(O, P, 'started'), ...provisionSubjects(O, provision), wfSubject(O, P, 'succeeded')];

    // 2. an external teardown of the api component, owned by an install svc does not know (4 events)
    const X = rid('wfx');
    const workflow = { id: X, type: 'teardown_component', owner_id: EXT_OWNER, owner_type: 'installs' };
    const step = {
      id: 'st_teardown',
      name: 'teardown api',
      idx: 0,
      target_type: 'install_deploys',
      component_id: apiComp.component_id,
      execution_type: 'system',
    };
    await ext(O, { kind: 'workflow', transition: 'started', workflow });
    await ext(O, { kind: 'workflow_step', transition: 'started', step }, X);
    await ext(O, { kind: 'workflow_step', transition: 'succeeded', step }, X);
    await ext(O, { kind: 'workflow', transition: 'succeeded' }, X);
    const externalAll = [
      wfSubject(O, X, 'started'),
      stepSubject(O, X, step.id, 'started'),
      stepSubject(O, X, step.id, 'succeeded'),
      wfSubject(O, X, 'succeeded'),
    ];

    // 3. a health verdict: api degraded (component unhealthy + install degraded)
    expect(
      await producer.request(`svc.ingest.${O}.health.${I}`, {
        component_id: apiComp.component_id,
        verdict: 'degraded',
        reason: 'p99 high',
      }),
    ).toEqual({ ok: true });
    const compUnhealthy = `${O}/component_health/${I}/${apiComp.component_id}/unhealthy`;
    const installDegraded = `${O}/install_health/${I}/degraded`;

    // 4. the install's runner goes inactive
    const R = install.runner_id;
    expect(await producer.request(`svc.ingest.${O}.runners.${R}`, { type: 'inactive', reason: 'rotation' })).toEqual({ ok: true });
    const runnerInactive = `${O}/runner_inactive/${R}/inactive`;

    const everything = [...provisionAll, ...externalAll, compUnhealthy, installDegraded, runnerInactive];
    const expected: Record<string, string[]> = {
      all: everything,
      installs_completion: [wfSubject(O, P, 'succeeded')],
      deploy_web: provisionSubjects(O, provision, (s) => s.name === 'deploy api'),
      teardown_and_health: [...externalAll, compUnhealthy],
      runner_inactive: [runnerInactive],
      runner_provision: provisionSubjects(O, provision, (s) => s.name === 'provision runner'),
      runners_failures: [],
      install_degraded: [installDegraded],
      sandboxes: provisionSubjects(O, provision, (s) => s.name === 'provision sandbox'),
      sandboxes_failures: [],
      env_prod: [...provisionAll, compUnhealthy, installDegraded, runnerInactive],
      env_staging: [],
      external_owner: externalAll,
      // component entities: the api and worker deploy steps, the external teardown step, the api's health
      web_components: [
        ...provisionSubjects(O, provision, (s) => s.name === 'deploy api' || s.name === 'deploy worker'),
        stepSubject(O, X, step.id, 'started'),
        stepSubject(O, X, step.id, 'succeeded'),
        compUnhealthy,
      ],
      any_action: [],
    };
    expect(everything).toHaveLength(17);
    expect(stepNamed('deploy api').component_id).toBe(apiComp.component_id);

    await settle(svc, rx, `${O}-all`, everything.length);
    for (const name of Object.keys(hooks)) {
      expect(sorted(rx.subjects(`${O}-${name}`)), `webhook ${name}`).toEqual(sorted(expected[name]));
    }
    // the same event reaches several webhooks with the same body (one id per event, not per delivery)
    const ids = new Map(rx.at(`${O}-all`).map((r) => [r.json.subject, r.json.id]));
    for (const r of rx.at(`${O}-env_prod`)) expect(r.json.id).toBe(ids.get(r.json.subject));
    // event details the routing relies on
    const ev = (s: string) => rx.at(`${O}-all`).find((r) => r.json.subject === s)!.json;
    expect(ev(runnerInactive)).toMatchObject({
      type: 'com.svc.runner.inactive.v1',
      data: { kind: 'runner_inactive', install_id: I, runner: { id: R } },
    });
    expect(ev(compUnhealthy)).toMatchObject({
      type: 'com.svc.component.health.v1',
      data: { install_id: I, component_id: apiComp.component_id, health: { verdict: 'degraded', previous: null, reason: 'p99 high' } },
    });
    expect(ev(installDegraded).data.health).toEqual({ verdict: 'degraded', previous: null, component_id: apiComp.component_id });
    expect(ev(wfSubject(O, X, 'started')).interests).toEqual(['resource:components', 'op:components.teardown', 'event:lifecycle.started']);
  });

  it.skipIf(skip)('X-Svc-Signature is the HMAC-SHA256 hex of the raw body, and absent without a secret', async () => {
    const { O, api } = await freshOrg();
    const secret = 'correct horse battery staple';
    await createHook(api, { webhook_url: rx.hook(`${O}-signed`), secret });
    await createHook(api, { webhook_url: rx.hook(`${O}-plain`) });
    const subjects = await externalRun(O, 2);
    const signed = await settle(svc, rx, `${O}-signed`, subjects.length);
    const plain = await settle(svc, rx, `${O}-plain`, subjects.length);
    expect(sorted(signed.map((r) => r.json.subject))).toEqual(sorted(subjects));
    for (const r of signed) {
      const header = r.headers['x-svc-signature'];
      expect(header).toMatch(/^[0-9a-f]{64}$/);
      expect(header).toBe(sign(secret, r.raw));
      expect(verify(secret, r.raw, header)).toBe(true);
      expect(verify('another secret', r.raw, header)).toBe(false);
      expect(r.headers['content-type']).toBe('application/cloudevents+json; charset=utf-8');
    }
    expect(plain).toHaveLength(subjects.length);
    for (const r of plain) expect(r.headers).not.toHaveProperty('x-svc-signature');

    // rotation: the next delivery is signed with the new secret; removal: no header at all
    const hook = (await api.get('/v1/orgs/current/webhooks')).body.find((w: Json) => w.webhook_url === rx.hook(`${O}-signed`));
    expect((await api.patch(`/v1/orgs/current/webhooks/${hook.webhook_id}`, { secret: 'rotated' })).status).toBe(200);
    await externalRun(O, 0);
    const afterRotation = (await settle(svc, rx, `${O}-signed`, subjects.length + 2)).slice(subjects.length);
    expect(afterRotation).toHaveLength(2);
    for (const r of afterRotation) expect(r.headers['x-svc-signature']).toBe(sign('rotated', r.raw));
    expect((await api.patch(`/v1/orgs/current/webhooks/${hook.webhook_id}`, { secret: null })).status).toBe(200);
    await externalRun(O, 0);
    const afterRemoval = (await settle(svc, rx, `${O}-signed`, subjects.length + 4)).slice(subjects.length + 2);
    expect(afterRemoval).toHaveLength(2);
    for (const r of afterRemoval) expect(r.headers).not.toHaveProperty('x-svc-signature');
  });

  it.skipIf(skip)(
    "a slow receiver's queue is told back to the control plane (its org is backlogged, another org is not), and its facts still " +
      'commit and deliver',
    async () => {
      const { O, api } = await freshOrg();
      const other = await freshOrg();
      rx.set(`${O}-slow`, { delayMs: 100 });
      await createHook(api, { webhook_url: rx.hook(`${O}-slow`) });
      await createHook(other.api, { webhook_url: rx.hook(`${other.O}-fast`) });
      const started = (id: string) => ({
        kind: 'workflow',
        transition: 'started',
        workflow: { id, type: 'manual_deploy', owner_id: 'inst_x', owner_type: 'installs' },
      });
      // 40 events at once: 8 attempts in flight at the webhook, the rest wait 100 ms and more to start
      const ids = Array.from({ length: 40 }, () => rid('wfx'));
      await Promise.all(ids.map((id) => ext(O, started(id))));
      await ext(other.O, started(rid('wfx')));
      // the server's status book (the context's type shows only what the HTTP layer reads of it)
      const status = svc.server.ctx.deliveryStatus as DeliveryStatusBook;
      await waitFor(() => status.backlogged(O), 10_000, 'the data plane to say the org with the slow receiver is backlogged');
      expect(status.backlogged(other.O)).toBe(false);
      // while it is, its facts are held a moment (src/ingest/ingest.ts HOLD_MS), then committed and delivered
      const more = Array.from({ length: 5 }, () => rid('wfx'));
      await Promise.all(more.map((id) => ext(O, started(id))));
      const all = [...ids, ...more].map((id) => wfSubject(O, id, 'started'));
      await waitFor(
        () => rx.at(`${O}-slow`).length >= all.length,
        20_000,
        `every event at the slow receiver (have ${rx.at(`${O}-slow`).length})`,
      );
      expect(sorted(rx.at(`${O}-slow`).map((r) => r.json.subject))).toEqual(sorted(all));
      expect(rx.at(`${other.O}-fast`)).toHaveLength(1);
    },
  );

  it.skipIf(skip)(
    'a hanging receiver next to a healthy one: the healthy one gets every event well under a second after its time',
    async () => {
      const { O, api } = await freshOrg();
      const stuck = await startReceiver(); // its own server: closing it ends the hanging attempts at once
      stuck.set(`${O}-hang`, { hang: true });
      await createHook(api, { webhook_url: stuck.hook(`${O}-hang`) });
      await createHook(api, { webhook_url: rx.hook(`${O}-fast`) });
      // more events than a subscriber keeps in flight, so the hanging webhook builds a queue
      const subjects = await externalRun(O, 12);
      expect(subjects).toHaveLength(26);
      await waitFor(() => rx.at(`${O}-fast`).length >= subjects.length, 10_000, 'every event at the healthy receiver');
      const hung = stuck.at(`${O}-hang`).length;
      await stuck.close(); // the hanging attempts fail now, and the rest of its queue fails fast
      await svc.settled(); // nothing more will arrive anywhere
      // not the delivery watchdog's `failing` about the hanging webhook (CONTRACT 4.1: tested in test/http/watchdog.test.ts)
      const fast = rx.at(`${O}-fast`).filter((r) => r.json.type !== WATCHDOG);
      expect(sorted(fast.map((r) => r.json.subject))).toEqual(sorted(subjects));
      const lags = fast.map((r) => r.at - Date.parse(r.json.time));
      for (const lag of lags) {
        expect(lag).toBeGreaterThanOrEqual(-5); // same clock; a little rounding of `time` to ms
        expect(lag).toBeLessThan(500);
      }
      expect(hung).toBeGreaterThan(0); // it was offered events, and was stuck on them
      expect(hung).toBeLessThan(subjects.length);
    },
  );

  it.skipIf(skip)('a 500 and a 401 receiver get exactly one attempt per event (no retry)', async () => {
    const { O, api } = await freshOrg();
    rx.set(`${O}-e500`, { status: 500 });
    rx.set(`${O}-e401`, { status: 401 });
    rx.set(`${O}-e302`, { status: 302, redirect: rx.hook(`${O}-redirected`) });
    for (const n of ['e500', 'e401', 'e302', 'ok']) await createHook(api, { webhook_url: rx.hook(`${O}-${n}`) });
    const subjects = await externalRun(O, 3);
    await waitFor(() => ['e500', 'e401', 'e302', 'ok'].every((n) => rx.at(`${O}-${n}`).length >= subjects.length), 5000, 'every receiver');
    // delivered or failed, and acknowledged: a retry (or a redelivery by the bus) cannot come after this
    await svc.settled();
    for (const n of ['e500', 'e401', 'e302', 'ok']) {
      // not the delivery watchdog's `failing` about the others (CONTRACT 4.1)
      const got = rx.at(`${O}-${n}`).filter((r) => r.json.type !== WATCHDOG);
      expect(got, n).toHaveLength(subjects.length);
      expect(new Set(got.map((r) => r.json.id)).size, n).toBe(subjects.length);
      expect(sorted(got.map((r) => r.json.subject)), n).toEqual(sorted(subjects));
    }
    expect(rx.at(`${O}-redirected`)).toHaveLength(0); // redirects are not followed
  });

  it.skipIf(skip)('duplicate producer transitions give one event and {ok: true}; invalid messages {ok: false, error}', async () => {
    const { O, api, runner } = await freshOrg({ repeat: true });
    await createHook(api, { webhook_url: rx.hook(`${O}-all`) });

    // an external workflow, every message sent twice, plus out-of-order leftovers
    const workflow = { id: rid('wfx'), type: 'manual_deploy', owner_id: 'inst_x', owner_type: 'installs' };
    const step = {
      id: 'st_1',
      name: 'deploy api',
      idx: 0,
      target_type: 'install_deploys',
      component_id: 'cmp_api',
      execution_type: 'system',
    };
    const W = workflow.id;
    const msgs: Json[] = [
      { kind: 'workflow', transition: 'started', workflow },
      { kind: 'workflow_step', transition: 'started', step },
      { kind: 'workflow_step', transition: 'succeeded', step },
      { kind: 'workflow', transition: 'succeeded', workflow },
    ];
    for (const m of msgs) {
      await ext(O, m, W);
      await ext(O, m, W); // the same message again (a producer that got no answer)
    }
    await ext(O, { kind: 'workflow_step', transition: 'started', step }, W); // started after terminal
    await ext(O, { kind: 'workflow_step', transition: 'failed', step, error: 'late' }, W); // second terminal
    await ext(O, { kind: 'workflow', transition: 'cancelled' }, W); // second workflow terminal
    const extSubjects = [
      wfSubject(O, W, 'started'),
      stepSubject(O, W, step.id, 'started'),
      stepSubject(O, W, step.id, 'succeeded'),
      wfSubject(O, W, 'succeeded'),
    ];

    // a workflow terminal while one of its steps is still started is ignored, not emitted
    const W2 = rid('wfx');
    await ext(O, { kind: 'workflow', transition: 'started', workflow: { ...workflow, id: W2 } });
    await ext(O, { kind: 'workflow_step', transition: 'started', step }, W2);
    await ext(O, { kind: 'workflow', transition: 'succeeded' }, W2);
    extSubjects.push(wfSubject(O, W2, 'started'), stepSubject(O, W2, step.id, 'started'));

    // an engine workflow whose runner sends every job result twice, then all of them once more
    const { provision, install } = await provisionInstall(api);
    expect(runner.jobs).toHaveLength(provision.steps.length);
    await waitFor(() => runner.replies.length === 4 * runner.jobs.length, 5000, 'all job replies');
    expect(runner.replies).toEqual(runner.replies.map(() => ({ ok: true })));
    for (const job of runner.jobs) {
      for (const status of ['succeeded', 'started', 'failed']) {
        expect(await producer.request(`svc.ingest.${O}.jobs.${job.job_id}`, { status })).toEqual({ ok: true });
      }
    }
    const P = provision.workflow_id;
    const provisionAll = [wfSubject(O, P, 'started'), ...provisionSubjects(O, provision), wfSubject(O, P, 'succeeded')];

    // invalid messages: answered {ok: false, error}, nothing recorded
    const I = install.install_id;
    const invalid: Array<[string, unknown]> = [
      [`svc.ingest.${O}.workflows.${rid('wfx')}`, 'this is not json'],
      [`svc.ingest.${O}.workflows.${rid('wfx')}`, { transition: 'started', workflow }], // no kind
      [`svc.ingest.${O}.workflows.${rid('wfx')}`, { kind: 'workflow', transition: 'started', workflow }], // id ≠ subject
      [`svc.ingest.${O}.workflows.${rid('wfx')}`, { kind: 'workflow', transition: 'started' }], // first message without workflow
      [`svc.ingest.${O}.workflows.${W}`, { kind: 'workflow_step', transition: 'started' }], // step message without step
      [`svc.ingest.${O}.workflows.${W}`, { kind: 'workflow', transition: 'exploded' }],
      [`svc.ingest.${O}.workflows.${P}`, { kind: 'workflow', transition: 'failed', workflow: { ...workflow, id: P } }], // engine-run
      [`svc.ingest.${O}.jobs.job_does_not_exist`, { status: 'succeeded' }],
      [`svc.ingest.${O}.jobs.${runner.jobs[0].job_id}`, { status: 'done' }],
      [`svc.ingest.${O}.runners.${install.runner_id}`, { type: 'reboot' }],
      [`svc.ingest.${O}.runners.${install.runner_id}`, { type: 'heartbeat', process: 'sleeping' }],
      [`svc.ingest.${O}.health.${I}`, { component_id: install.components[0].component_id, verdict: 'meh' }],
      [`svc.ingest.${O}.health.${I}`, { verdict: 'healthy' }],
      [`svc.ingest.${O}.health.inst_nope`, { component_id: install.components[0].component_id, verdict: 'degraded' }],
      [`svc.ingest.${O}.health.${I}`, { component_id: 'cmp_nope', verdict: 'degraded' }],
    ];
    for (const [subject, body] of invalid) {
      const r = await producer.request(subject, body);
      expect(r, `${subject} ${JSON.stringify(body)}`).toMatchObject({ ok: false, error: expect.any(String) });
      expect(Object.keys(r).sort()).toEqual(['error', 'ok']);
      expect(r.error.length).toBeGreaterThan(0);
    }

    const all = [...extSubjects, ...provisionAll];
    const got = await settle(svc, rx, `${O}-all`, all.length);
    expect(sorted(got.map((r) => r.json.subject))).toEqual(sorted(all));
    // the engine-run workflow was not touched by the invalid report
    expect((await api.get(`/v1/workflows/${P}`)).body.status).toBe('succeeded');
    const w2 = (await api.get(`/v1/workflows/${W2}`)).body;
    expect(w2.status).toBe('started');
  });

  it.skipIf(skip)('component and install health crossings end to end', async () => {
    const { O, api } = await freshOrg();
    const { install, api: a, worker: w } = await provisionInstall(api);
    const I = install.install_id;
    await createHook(api, {
      webhook_url: rx.hook(`${O}-comp`),
      interests: { resources: { components: { outcome: 'none', component_health: true } } },
    });
    await createHook(api, {
      webhook_url: rx.hook(`${O}-inst`),
      interests: { resources: { installs: { outcome: 'none', install_degraded: true } } },
    });
    await createHook(api, {
      webhook_url: rx.hook(`${O}-both`),
      interests: {
        resources: { components: { outcome: 'none', component_health: true }, installs: { outcome: 'none', install_degraded: true } },
      },
    });
    await createHook(api, {
      webhook_url: rx.hook(`${O}-worker`),
      interests: { resources: { components: { component_health: true }, installs: { install_degraded: true } } },
      match: { components: { ids: [w.component_id] } },
    });

    const seen = { comp: 0, inst: 0 };
    /** Send a verdict; expect exactly the listed new component and install events. */
    const verdict = async (
      c: Json,
      v: string,
      expectComp: Array<{ transition: string; verdict: string; previous: string | null }>,
      expectInst: Array<{ transition: string; verdict: string; previous: string | null }>,
    ) => {
      expect(
        await producer.request(`svc.ingest.${O}.health.${I}`, { component_id: c.component_id, verdict: v, reason: `${c.name} ${v}` }),
      ).toEqual({ ok: true });
      seen.comp += expectComp.length;
      seen.inst += expectInst.length;
      await waitFor(
        () => rx.at(`${O}-comp`).length >= seen.comp && rx.at(`${O}-inst`).length >= seen.inst,
        5000,
        `events after ${c.name} ${v}`,
      );
      await svc.settled(); // an extra event would have arrived by now
      const comp = rx.at(`${O}-comp`);
      const inst = rx.at(`${O}-inst`);
      expect(comp, `component events after ${c.name} ${v}`).toHaveLength(seen.comp);
      expect(inst, `install events after ${c.name} ${v}`).toHaveLength(seen.inst);
      const newComp = comp.slice(seen.comp - expectComp.length).map((r) => r.json);
      const newInst = inst.slice(seen.inst - expectInst.length).map((r) => r.json);
      newComp.forEach((e, i) => {
        expect(e.subject).toBe(`${O}/component_health/${I}/${c.component_id}/${expectComp[i].transition}`);
        expect(e.type).toBe('com.svc.component.health.v1');
        expect(e.data).toMatchObject({ kind: 'component_health', install_id: I, component_id: c.component_id });
        expect(e.data.health).toEqual({ verdict: expectComp[i].verdict, previous: expectComp[i].previous, reason: `${c.name} ${v}` });
        expect(e.interests).toEqual(['resource:components', 'op:components.health', `event:component.${expectComp[i].transition}`]);
      });
      newInst.forEach((e, i) => {
        expect(e.subject).toBe(`${O}/install_health/${I}/${expectInst[i].transition}`);
        expect(e.type).toBe('com.svc.install.health.v1');
        expect(e.data.health).toEqual({ verdict: expectInst[i].verdict, previous: expectInst[i].previous, component_id: c.component_id });
        expect(e.interests).toEqual(['resource:installs', 'op:installs.health', `event:install.${expectInst[i].transition}`]);
      });
    };

    await verdict(a, 'unknown', [], []); // unknown first: nothing, and it is not remembered
    await verdict(
      a,
      'degraded',
      [{ transition: 'unhealthy', verdict: 'degraded', previous: null }],
      [{ transition: 'degraded', verdict: 'degraded', previous: null }],
    );
    await verdict(a, 'unhealthy', [], []); // degraded → unhealthy is silent, for both levels
    await verdict(a, 'unknown', [], []); // unknown changes nothing: unhealthy stands
    await verdict(w, 'degraded', [{ transition: 'unhealthy', verdict: 'degraded', previous: null }], []); // install already bad
    await verdict(a, 'healthy', [{ transition: 'recovered', verdict: 'healthy', previous: 'unhealthy' }], []); // worker still degraded
    await verdict(w, 'unknown', [], []);
    await verdict(
      w,
      'healthy',
      [{ transition: 'recovered', verdict: 'healthy', previous: 'degraded' }],
      [{ transition: 'recovered', verdict: 'healthy', previous: 'degraded' }],
    );
    await verdict(w, 'healthy', [], []); // healthy while ok
    await verdict(
      a,
      'unhealthy',
      [{ transition: 'unhealthy', verdict: 'unhealthy', previous: 'healthy' }],
      [{ transition: 'degraded', verdict: 'unhealthy', previous: 'healthy' }],
    );

    // both levels subscribed: a single-component outage is two messages each time
    const both = rx.at(`${O}-both`).map((r) => r.json.subject);
    expect(sorted(both)).toEqual(sorted([...rx.subjects(`${O}-comp`), ...rx.subjects(`${O}-inst`)]));
    // match.components tests the component of a component health event, never an install health event
    expect(sorted(rx.subjects(`${O}-worker`))).toEqual(
      sorted([`${O}/component_health/${I}/${w.component_id}/unhealthy`, `${O}/component_health/${I}/${w.component_id}/recovered`]),
    );
    // GET install reports the composite of the last known verdicts
    expect((await api.get(`/v1/installs/${I}`)).body.health).toBe('unhealthy');
  });
});

// ---------------------------------------------------------------------------------------------
// The runner health check runs on the engine's clock: here a ManualClock the test advances, one
// health check per advance, with heartbeats sent (and committed) between them. Its own svc per
// bus, as the engine's time of facts is the clock's (the tests above measure lags in real time).

const HEALTH_EVERY_MS = 60_000;

describe.each(modes)("runner health on the %s bus (the engine's clock advanced by the test)", (mode) => {
  const skip = mode === 'nats' && !haveNats;
  const clock = new ManualClock(Date.now());
  let nats: NatsServerHandle | null = null;
  let svc: TestService;
  let producer: Producer;
  let rx: Receiver;

  beforeAll(async () => {
    if (skip) return;
    if (mode === 'nats') nats = await startNatsServer();
    svc = await startService({ natsUrl: nats?.url ?? null, localRunner: false, runnerHealthIntervalMs: HEALTH_EVERY_MS }, { clock });
    producer = mode === 'nats' ? await natsProducer(nats!.url) : memoryProducer(svc.server.bus);
    rx = await startReceiver();
  });

  afterAll(async () => {
    if (skip) return;
    await producer?.close();
    await svc?.stop();
    await rx?.close();
    await nats?.stop();
  });

  it.skipIf(skip)('one unhealthy event per outage, recovery on a running heartbeat, inactive is not unhealthy', async () => {
    const org: OrgCreds = svc.createOrg(rid('org'));
    const O = org.org_id;
    const api = svc.api(org);
    await externalRunner(producer, O);
    await createHook(api, {
      webhook_url: rx.hook(`${O}-runners`),
      interests: { resources: { runners: { ops: ['unhealthy', 'inactive'] } } },
    });
    const { install } = await provisionInstall(api);
    const R: string = install.runner_id;
    expect(R).toBeTruthy();
    const hb = (process: 'running' | 'missing') => producer.request(`svc.ingest.${O}.runners.${R}`, { type: 'heartbeat', process });
    const unhealthy = () => rx.at(`${O}-runners`).filter((r) => r.json.type === 'com.svc.runner.unhealthy.v1');
    const inactive = () => rx.at(`${O}-runners`).filter((r) => r.json.type === 'com.svc.runner.inactive.v1');
    /** n health checks, each after a heartbeat `beat` (committed: the reply comes after the commit) or none; then everything delivered */
    const checks = async (n: number, beat?: 'running' | 'missing') => {
      for (let i = 0; i < n; i++) {
        if (beat) expect(await hb(beat)).toEqual({ ok: true });
        clock.advance(HEALTH_EVERY_MS);
      }
      await svc.settled();
    };

    // a pending runner (no heartbeat yet) is never unhealthy
    await checks(3);
    expect(unhealthy()).toHaveLength(0);

    // active while it heart-beats
    await checks(4, 'running');
    expect(unhealthy()).toHaveLength(0);

    // outage 1: exactly one event, however many checks pass
    await checks(1);
    expect(unhealthy()).toHaveLength(1);
    await checks(6);
    expect(unhealthy()).toHaveLength(1);
    const ev = unhealthy()[0].json;
    expect(ev).toMatchObject({
      type: 'com.svc.runner.unhealthy.v1',
      subject: `${O}/runner_unhealthy/${R}/unhealthy`,
      svckind: 'runner_unhealthy',
      svctransition: 'unhealthy',
      data: {
        kind: 'runner_unhealthy',
        transition: 'unhealthy',
        org_id: O,
        install_id: install.install_id,
        runner: { id: R, group_type: 'install' },
      },
    });
    expect(ev.data.reason).toEqual(expect.any(String));
    expect(ev.interests).toEqual([
      'resource:runners',
      'op:runners.unhealthy',
      'event:runner.unhealthy',
      'outcome:completion',
      'outcome:failures',
    ]);
    expect(ev.data.links.install).toMatch(new RegExp(`/${O}/installs/${install.install_id}$`));

    // recovery: running heartbeats, several checks, no event
    await checks(5, 'running');
    expect(unhealthy()).toHaveLength(1);

    // outage 2 emits again, once
    await checks(5);
    expect(unhealthy()).toHaveLength(2);

    // back; an inactive message emits runner inactive and does not make it unhealthy
    await checks(3, 'running');
    expect(await producer.request(`svc.ingest.${O}.runners.${R}`, { type: 'inactive', reason: 'scheduled rotation' })).toEqual({
      ok: true,
    });
    await checks(5, 'running');
    expect(inactive()).toHaveLength(1);
    expect(inactive()[0].json).toMatchObject({
      subject: `${O}/runner_inactive/${R}/inactive`,
      data: { kind: 'runner_inactive', reason: 'scheduled rotation', install_id: install.install_id, runner: { id: R } },
    });
    expect(unhealthy()).toHaveLength(2);

    // outage 3: heartbeats keep coming but say the process is missing
    await checks(5, 'missing');
    expect(unhealthy()).toHaveLength(3);
    expect(unhealthy()[2].json.data.reason).not.toBe(unhealthy()[0].json.data.reason);
    expect(rx.at(`${O}-runners`)).toHaveLength(4);
  });
});
