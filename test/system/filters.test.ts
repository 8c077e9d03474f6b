// Payload filters end to end (CONTRACT 10.2, issue 54), in both bus modes, with a real receiver:
// a webhook gets an event only when its interests, match and filter all admit it; the filter is
// set, changed and removed over the API (checked on write against the catalog, each problem 400
// naming its path); a PATCH naming only the filter keeps the subscription; recover sends what the
// filter admits now, and ping ignores it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findNatsServer, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.ts';
import { startReceiver, type Receiver } from '../helpers/receiver.ts';
import { startService, waitFor, type ApiClient, type OrgCreds, type TestService } from '../helpers/service.ts';
import { rid } from '../helpers/ids.ts';
import { ingestRequest } from '../helpers/producer.ts';
import { connect, type NatsConnection } from '@nats-io/transport-node';

type Json = any;
const HOOKS = '/v1/orgs/current/webhooks';
const modes = ['memory', 'nats'] as const;
const haveNats = findNatsServer() !== null;

describe.each(modes)('payload filters on the %s bus', (mode) => {
  const skip = mode === 'nats' && !haveNats;
  let nats: NatsServerHandle | null = null;
  let nc: NatsConnection | null = null;
  let svc: TestService;
  let rx: Receiver;

  beforeAll(async () => {
    if (skip) return;
    if (mode === 'nats') nats = await startNatsServer();
    svc = await startService({ natsUrl: nats?.url ?? null, localRunner: false });
    expect(svc.server.bus.kind).toBe(mode);
    if (nats) nc = await connect({ servers: nats.url, name: 'filters-test-producer' });
    rx = await startReceiver();
  });

  afterAll(async () => {
    if (skip) return;
    await nc?.drain();
    await svc?.stop();
    await rx?.close();
    await nats?.stop();
  });

  async function request(subject: string, body: unknown): Promise<Json> {
    const text = JSON.stringify(body);
    if (nc) return (await ingestRequest(nc, subject, text, { timeout: 5000 })).json();
    return (await svc.server.bus.request(subject, text, { timeoutMs: 5000 })).json();
  }

  /** An external workflow with steps named `names`, each started then succeeded or failed. */
  async function run(O: string, type: string, steps: Array<[string, 'succeeded' | 'failed']>): Promise<void> {
    const workflow = { id: rid('wfx'), type, owner_id: 'inst_x', owner_type: 'installs' };
    const ext = async (msg: Json) => expect(await request(`svc.ingest.${O}.workflows.${workflow.id}`, msg)).toEqual({ ok: true });
    await ext({ kind: 'workflow', transition: 'started', workflow });
    for (const [i, [name, end]] of steps.entries()) {
      const step = { id: `st_${i}`, name, idx: i, target_type: 'install_deploys', component_id: `cmp_${i}`, execution_type: 'system' };
      await ext({ kind: 'workflow_step', transition: 'started', step });
      await ext({ kind: 'workflow_step', transition: end, step, ...(end === 'failed' ? { error: 'boom' } : {}) });
    }
    await ext({ kind: 'workflow', transition: 'succeeded' });
  }

  const create = async (api: ApiClient, name: string, extra: Json): Promise<string> => {
    const r = await api.post(HOOKS, { webhook_url: rx.hook(name), ...extra });
    expect(r.status, r.text).toBe(201);
    return r.body.webhook_id;
  };

  function freshOrg() {
    const org: OrgCreds = svc.createOrg(rid('org'));
    return { O: org.org_id, api: svc.api(org) };
  }

  it.skipIf(skip)('a webhook gets exactly what its interests, match and filter admit; changed and removed over the API', async () => {
    const { O, api } = freshOrg();
    const tag = rid('f');
    const all = `${tag}-all`;
    const failedSteps = `${tag}-failed-steps`;
    const either = `${tag}-either`;
    const steps = `${tag}-steps`;
    await create(api, all, { interests: { all_events: true } });
    const fs = await create(api, failedSteps, {
      filter: { type: 'com.svc.workflow_step.lifecycle.v1', data: { transition: 'failed', step: { name: { $startsWith: 'deploy ' } } } },
    });
    await create(api, either, {
      filter: { $or: [{ data: { workflow: { type: { $in: ['reprovision'] } } } }, { subject: { $endsWith: '/st_1/succeeded' } }] },
    });
    // the filter is AND-ed with interests: only workflow_step lifecycle events of components' deploys
    await create(api, steps, {
      interests: { resources: { components: { ops: ['deploy'] } } },
      filter: { data: { step: { name: { $neq: 'deploy api' } } } },
    });
    const shown = (await api.get(`${HOOKS}/${fs}`)).body;
    expect(shown.filter).toEqual({
      type: 'com.svc.workflow_step.lifecycle.v1',
      data: { transition: 'failed', step: { name: { $startsWith: 'deploy ' } } },
    });

    await run(O, 'manual_deploy', [
      ['deploy api', 'failed'],
      ['deploy web', 'succeeded'],
      ['migrate db', 'failed'],
    ]);
    await run(O, 'reprovision', [['deploy web', 'succeeded']]);
    await svc.settled();
    await waitFor(() => rx.at(all).length >= 12, 10_000, 'every event at the unfiltered webhook');

    // what each should have got, read plainly off the unfiltered webhook's events
    const events: Json[] = rx.at(all).map((r) => r.json);
    expect(events).toHaveLength(12);
    const subjects = (xs: Json[]) => xs.map((e) => e.subject).sort();
    const want = {
      [failedSteps]: events.filter(
        (e) => e.type === 'com.svc.workflow_step.lifecycle.v1' && e.data.transition === 'failed' && e.data.step.name.startsWith('deploy '),
      ),
      [either]: events.filter((e) => e.data.workflow?.type === 'reprovision' || e.subject.endsWith('/st_1/succeeded')),
    };
    expect(want[failedSteps]).toHaveLength(1);
    expect(want[either].length).toBe(5);
    for (const [name, xs] of Object.entries(want)) expect(subjects(rx.at(name).map((r) => r.json)), name).toEqual(subjects(xs));
    // interests admit the components/deploy events (by the event's own slugs); the filter drops `deploy api` (a missing step passes $neq)
    const gotSteps = rx.at(steps).map((r) => r.json);
    const wantSteps = events.filter((e) => e.interests.includes('op:components.deploy') && e.data.step?.name !== 'deploy api');
    expect(wantSteps.length).toBeGreaterThan(2);
    expect(wantSteps.length).toBeLessThan(events.length);
    expect(subjects(gotSteps)).toEqual(subjects(wantSteps));

    // changed: the failed-steps webhook now takes succeeded ones; the PATCH keeps its subscription
    const before = (await api.get(`${HOOKS}/${fs}`)).body;
    const patched = await api.patch(`${HOOKS}/${fs}`, { filter: { data: { transition: 'succeeded', step: { $exist: true } } } });
    expect(patched.status, patched.text).toBe(200);
    expect(patched.body.interests).toEqual(before.interests);
    expect(patched.body.match).toEqual(before.match);
    const n = rx.at(failedSteps).length;
    const total = rx.at(all).length;
    await run(O, 'manual_deploy', [
      ['deploy api', 'failed'],
      ['deploy web', 'succeeded'],
    ]);
    await svc.settled();
    await waitFor(() => rx.at(all).length >= total + 6, 10_000, 'the second run at the unfiltered webhook');
    const second = rx
      .at(failedSteps)
      .slice(n)
      .map((r) => r.json);
    expect(second.map((e) => `${e.data.step.name} ${e.data.transition}`)).toEqual(['deploy web succeeded']);

    // removed: null, and the webhook gets everything again
    const removed = await api.patch(`${HOOKS}/${fs}`, { filter: null });
    expect(removed.body.filter).toBeNull();
    const m = rx.at(failedSteps).length;
    await run(O, 'manual_deploy', []);
    await svc.settled();
    await waitFor(() => rx.at(failedSteps).length >= m + 2, 10_000, 'both events once the filter is removed');
    expect(rx.at(failedSteps).length).toBe(m + 2);

    // ping ignores the filter
    await api.patch(`${HOOKS}/${fs}`, { filter: { type: 'com.svc.nothing.v1' } });
    const ping = await api.post(`${HOOKS}/${fs}/ping`);
    expect(ping.body.delivered).toBe(true);
  });

  it.skipIf(skip)('recover sends what the filter admits now', async () => {
    const { O, api } = freshOrg();
    const name = rid('rec');
    const since = new Date(Date.now() - 1000).toISOString();
    const id = await create(api, name, { filter: { data: { transition: 'started' } } });
    await run(O, 'manual_deploy', [
      ['deploy a', 'succeeded'],
      ['deploy b', 'failed'],
    ]);
    await svc.settled();
    await waitFor(() => rx.at(name).length >= 3, 10_000, 'the started events');
    expect(rx.at(name).map((r) => r.json.data.transition)).toEqual(['started', 'started', 'started']);
    // the filter now admits the failed step alone: a recovery of everything sends it alone
    await api.patch(`${HOOKS}/${id}`, { filter: { data: { transition: 'failed' } } });
    const r = await api.post(`${HOOKS}/${id}/recover`, { since, only_failed: false });
    expect(r.status, r.text).toBe(202);
    await waitFor(async () => (await api.get(`${HOOKS}/${id}/recoveries/${r.body.recovery_id}`)).body.state === 'done', 10_000, 'recovery');
    const rec = (await api.get(`${HOOKS}/${id}/recoveries/${r.body.recovery_id}`)).body;
    expect(rec.events).toBe(1);
    await waitFor(() => rx.at(name).length >= 4, 10_000, 'the recovered event');
    const last = rx.at(name)[3];
    expect(last.json.data.transition).toBe('failed');
    expect(last.headers['x-svc-recovery']).toBe(r.body.recovery_id);
  });

  it.skipIf(skip)(
    'a filter that is malformed, too deep, too large, with too many operators or an unknown path is 400 naming it; nothing changes',
    async () => {
      const { api } = freshOrg();
      const url = rx.hook(rid('bad'));
      const deep = (n: number): Json => {
        let f: Json = { $exist: true };
        for (let i = 1; i < n; i++) f = { [`k${i}`]: f };
        return { data: { approval: { plan: f } } };
      };
      const many = Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`f${i}`, { $exist: true }]));
      const cases: Array<[Json, Json, string, RegExp]> = [
        [{ filter: { data: { transition: { $regex: 'x' } } } }, {}, 'filter.data.transition.$regex', /unknown operator/],
        [{ filter: 'type' }, {}, 'filter', /JSON object/],
        [{ filter: { data: { step: ['a'] } } }, {}, 'filter.data.step', /\$contains/],
        [{ filter: deep(8) }, {}, 'filter.data.approval.plan.k7.k6.k5.k4.k3.k2.k1', /at most 8/],
        [{ filter: { data: { approval: { plan: many } } } }, {}, 'filter', /65 operators/],
        [{ filter: { subject: 'x'.repeat(4100) } }, {}, 'filter', /at most 4096/],
        [
          { filter: { data: { stepp: { name: 'x' } } } },
          {},
          'filter.data.stepp.name',
          /no event type these interests admit has data\.stepp\.name/,
        ],
        // runner events have no step: the path is unknown to the types these interests admit
        [
          { filter: { data: { step: { name: 'x' } } } },
          { interests: { resources: { runners: { ops: ['unhealthy'] } } } },
          'filter.data.step.name',
          /com\.svc\.runner\.unhealthy\.v1/,
        ],
      ];
      for (const [body, extra, path, message] of cases) {
        const r = await api.post(HOOKS, { webhook_url: url, ...extra, ...body });
        expect(r.status, r.text).toBe(400);
        expect(r.body.error).toBe('invalid_request');
        expect(r.body.details[0].path, r.text).toBe(path);
        expect(r.body.details[0].message, r.text).toMatch(message);
      }
      expect((await api.get(HOOKS)).body).toEqual([]);
      // below an open schema ({}: an approval's plan) any path is known; the step's name on step events
      const ok = await create(api, rid('ok'), {
        filter: { data: { approval: { plan: { resources: { $contains: { action: 'delete' } } } } } },
      });
      const stepsOnly = await create(api, rid('ok'), {
        interests: { resources: { components: { ops: ['deploy'] } } },
        filter: { data: { step: { name: 'x' } } },
      });
      // a PATCH of the interests that would leave the filter's path unknown is refused, and nothing changes
      const r = await api.patch(`${HOOKS}/${stepsOnly}`, { interests: { resources: { runners: { ops: ['unhealthy'] } } } });
      expect(r.status, r.text).toBe(400);
      expect(r.body.details[0].path).toBe('filter.data.step.name');
      expect((await api.get(`${HOOKS}/${stepsOnly}`)).body.interests).toEqual({ resources: { components: { ops: ['deploy'] } } });
      // {} is no filter
      const cleared = await api.patch(`${HOOKS}/${ok}`, { filter: {} });
      expect(cleared.body.filter).toBeNull();
    },
  );
});
