// Verification gates (CONTRACT 4.3 `verification`, 6.2 `com.svc.rollout.verification.v1`, issue 29),
// driven as a user drives them: a real svc in process (local runner, real SQLite file, real HTTP)
// with the engine on a ManualClock that the test moves through each interval, and a real HTTP
// receiver playing the verification URL (its answers decided per request). Every request is
// checked with the stock `standardwebhooks` library. Then a real `svc serve` child process,
// killed with SIGKILL while it waits between two requests, restarted on the same database.
import Database from 'better-sqlite3';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Webhook } from 'standardwebhooks';
import { ManualClock } from '../helpers/clock.ts';
import { startReceiver, type Receiver, type Received } from '../helpers/receiver.ts';
import { apiClient, newDbWithOrg, startService, waitFor, type ApiClient, type OrgCreds, type TestService } from '../helpers/service.ts';
import { children, spawnService } from '../helpers/child-service.ts';
import { appWithThreeConfigs, get, installWith, post, waitStep, waitWf } from '../helpers/workflows.ts';
import { rid } from '../helpers/ids.ts';
import { listSteps } from '../../store/workflows.ts';
import type { Db } from '../../store/db.ts';
import { verifySnapshotOf, type VerifySnapshot } from '../../machines/verification-gate.ts';

type Json = any;

const cfg = (image: string) => ({ components: [{ name: 'api', values: { image } }] });
const SECRET = `whsec_${Buffer.from('verification secret of this test!').toString('base64')}`;

let svc: TestService;
let rcv: Receiver;
let org: OrgCreds;
let api: ApiClient;
const clock = new ManualClock(Date.now());

beforeAll(async () => {
  // the test harness allows private targets (test/helpers/service.ts allowPrivateTargets: true): the receiver is on 127.0.0.1
  svc = await startService({}, { clock });
  rcv = await startReceiver();
  org = svc.createOrg('verification');
  api = svc.api(org);
}, 30_000);
afterAll(async () => {
  await svc?.stop();
  await rcv?.close();
});

/** A branch over groups g1 and g2 of one install each, both on v1. */
async function twoGroups(a: ApiClient = api) {
  const { app, v1, v2 } = await appWithThreeConfigs(a, rid('shop'), cfg);
  const installs = [];
  for (let i = 0; i < 2; i++) installs.push(await installWith(a, rid('inst'), app.app_id, v1.app_config_id, { ring: `g${i + 1}` }));
  const branch = await post(a, `/v1/apps/${app.app_id}/branches`, {
    name: 'main',
    install_groups: installs.map((i, n) => ({ name: `g${n + 1}`, install_ids: [i.install_id] })),
  });
  return { app, v1, v2, installs, branch };
}

async function approve(a: ApiClient, W: string, group: string): Promise<void> {
  const { step } = await waitStep(a, W, `plan install group: ${group}`, 'awaiting_approval');
  await post(a, `/v1/workflows/${W}/steps/${step.step_id}/approval`, { response: 'approved' }, 200);
}

/** The verify step's gate as the engine keeps it (SQLite), once it has one. */
function gateOf(W: string, group: string, db: Db = svc.server.ctx.db): VerifySnapshot | undefined {
  const s = listSteps(db, W).find((x) => x.name === `verify install group: ${group}`);
  return s ? verifySnapshotOf(s.params) : undefined;
}

/** The same, as a svc child process keeps it in its database file (read-only). */
function gateInFile(file: string, W: string, group: string): VerifySnapshot | undefined {
  const h = new Database(file, { readonly: true, fileMustExist: true });
  try {
    return gateOf(W, group, h);
  } finally {
    h.close();
  }
}

/** Wait until the verify step has recorded `n` answers of URL 0 (its last answer is from the n-th request). */
async function answered(W: string, group: string, n: number): Promise<void> {
  await waitFor(
    () => {
      const c = gateOf(W, group)?.context.checks[0];
      // the clock has not moved since the n-th request: an answer recorded now is that request's
      return !!c && c.attempt === n && c.last !== null && Date.parse(c.last.at) === clock.now();
    },
    10_000,
    `answer ${n} of ${group} recorded`,
  );
}

/** Answers in turn, the last one repeated. */
const inTurn = (answers: Array<{ status: number; body?: string }>) => {
  let n = 0;
  return () => answers[Math.min(n++, answers.length - 1)];
};

const verified = (r: Received, secret = SECRET) => new Webhook(secret).verify(r.raw, r.headers as Record<string, string>) as Json;

describe('verification gates (CONTRACT 4.3)', () => {
  it('pending (202), pending, pass: the group moves on after exactly 3 signed requests, one interval apart; the secret is never shown', {
    timeout: 60_000,
  }, async () => {
    const f = await twoGroups();
    rcv.set('v-pass', {
      answer: inTurn([{ status: 202 }, { status: 200, body: '{"verdict":"pending"}' }, { status: 200, body: '{"verdict":"pass"}' }]),
    });
    const run = await post(api, `/v1/apps/${f.app.app_id}/branches/${f.branch.app_branch_id}/runs`, {
      app_config_id: f.v2.app_config_id,
      skip_builds: true,
      verification: [{ url: rcv.hook('v-pass'), secret: SECRET, interval: '10s' }],
    });
    const W = run.workflow_id;
    expect(JSON.stringify(run)).not.toContain(SECRET);
    await approve(api, W, 'g1');
    // asked at once after the deploy
    await waitFor(() => rcv.at('v-pass').length === 1, 10_000, 'the first request');
    await answered(W, 'g1', 1);
    clock.advance(9_999);
    // an ask is counted (and committed) in the step before its request is sent, in the turn its
    // timer fires, which is inside advance(): none counted now, none sent
    expect(gateOf(W, 'g1')?.context.checks[0].attempt).toBe(1);
    expect(rcv.at('v-pass')).toHaveLength(1); // not before the interval
    clock.advance(1);
    await waitFor(() => rcv.at('v-pass').length === 2, 10_000, 'the second request');
    await answered(W, 'g1', 2);
    clock.advance(10_000);
    await waitFor(() => rcv.at('v-pass').length === 3, 10_000, 'the third request');
    const { wf } = await waitStep(api, W, 'plan install group: g2', 'awaiting_approval'); // promoted
    expect(wf.steps.map((s: Json) => [s.name, s.status]).slice(1, 4)).toEqual([
      ['plan install group: g1', 'succeeded'],
      ['deploy install group: g1', 'succeeded'],
      ['verify install group: g1', 'succeeded'],
    ]);
    expect(wf.steps.find((s: Json) => s.name === 'verify install group: g1').execution_type).toBe('system');
    clock.advance(60_000);
    expect(gateOf(W, 'g1')?.context.checks[0].attempt).toBe(3); // no ask counted after the pass (none sent)
    const calls = rcv.at('v-pass');
    expect(calls).toHaveLength(3);

    // each request: signed (Standard Webhooks, the stock library), the CloudEvent of CONTRACT 6.2
    const [step] = wf.steps.filter((s: Json) => s.name === 'verify install group: g1');
    const g1 = f.installs[0];
    calls.forEach((c, n) => {
      const ev = verified(c);
      expect(c.headers['content-type']).toBe('application/cloudevents+json; charset=utf-8');
      expect(c.headers['webhook-id']).toBe(ev.id);
      expect(ev).toMatchObject({
        specversion: '1.0',
        type: 'com.svc.rollout.verification.v1',
        subject: `${org.org_id}/rollout_verification/${W}/${step.step_id}/requested`,
        svcorgid: org.org_id,
        svckind: 'rollout_verification',
        svctransition: 'requested',
      });
      expect(ev.data).toMatchObject({
        kind: 'rollout_verification',
        transition: 'requested',
        org_id: org.org_id,
        workflow: { id: W, type: 'app_branch_run' },
        step: { id: step.step_id, name: 'verify install group: g1', execution_type: 'system' },
        rollout: {
          run_id: W,
          group: 'g1',
          attempt: n + 1,
          installs: [
            {
              install_id: g1.install_id,
              install_name: g1.name,
              labels: { ring: 'g1' },
              old_app_config_id: f.v1.app_config_id,
              new_app_config_id: f.v2.app_config_id,
            },
          ],
        },
      });
      expect(ev.data.links.workflow).toContain(`/workflows/${W}`);
      expect(c.raw.toString()).not.toContain(SECRET);
    });
    expect(new Set(calls.map((c) => c.json.id)).size).toBe(3);
    // the last answer per URL is kept in the step
    expect(gateOf(W, 'g1')).toMatchObject({
      state: 'passed',
      context: { checks: [{ attempt: 3, passed: true, last: { verdict: 'pass', status: 200 } }] },
    });
    // never shown: not in the workflow's view, not in its events
    expect((await api.get(`/v1/workflows/${W}`)).text).not.toContain(SECRET);
    await svc.settled();
    const events = (await svc.events(org.org_id)).filter((e) => e.data?.workflow?.id === W);
    expect(events.length).toBeGreaterThan(0);
    expect(JSON.stringify(events)).not.toContain(SECRET);
    // never sent as an event of the bus or to webhooks
    expect(events.some((e) => e.type === 'com.svc.rollout.verification.v1')).toBe(false);
    await post(api, `/v1/workflows/${W}/cancel`, undefined, 200);
  });

  it('fail: the group fails at once with trigger verification and its reason; on_failure rollback returns it to its config ' +
    'before the run', {
    timeout: 60_000,
  }, async () => {
    const f = await twoGroups();
    rcv.set('v-fail', { answer: () => ({ status: 200, body: '{"verdict":"fail","reason":"error rate 7%"}' }) });
    const run = await post(api, `/v1/apps/${f.app.app_id}/branches/${f.branch.app_branch_id}/runs`, {
      app_config_id: f.v2.app_config_id,
      skip_builds: true,
      rollout: { on_failure: 'rollback' },
      verification: [{ url: rcv.hook('v-fail') }],
    });
    const W = run.workflow_id;
    await approve(api, W, 'g1');
    const done = await waitWf(api, W);
    expect(done.status).toBe('failed');
    expect(rcv.at('v-fail')).toHaveLength(1);
    expect(rcv.at('v-fail')[0].headers['webhook-signature']).toBeUndefined(); // no secret: not signed
    expect(done.steps.map((s: Json) => [s.name, s.status])).toEqual([
      ['build components', 'succeeded'], // skipped, reported as succeeded
      ['plan install group: g1', 'succeeded'],
      ['deploy install group: g1', 'succeeded'],
      ['verify install group: g1', 'failed'],
      ['plan install group: g2', 'cancelled'],
      ['deploy install group: g2', 'cancelled'],
      ['verify install group: g2', 'cancelled'],
      ['rollback install group: g1', 'succeeded'],
    ]);
    expect(done.steps.find((s: Json) => s.name === 'verify install group: g1').error).toBe(
      `verification ${rcv.hook('v-fail')} answered fail: error rate 7%`,
    );
    expect((await get(api, `/v1/installs/${f.installs[0].install_id}`)).app_config_id).toBe(f.v1.app_config_id);
    expect((await get(api, `/v1/installs/${f.installs[1].install_id}`)).app_config_id).toBe(f.v1.app_config_id);
    await svc.settled();
    const last = (await svc.events(org.org_id)).filter((e) => e.data?.workflow?.id === W).at(-1);
    expect(last.data).toMatchObject({
      kind: 'workflow',
      transition: 'failed',
      rollout: { run_id: W, trigger: 'verification', reason: 'error rate 7%' },
    });
  });

  it('failure_limit: answers that are neither pass, fail nor pending count; 2 in a row fail the group', { timeout: 60_000 }, async () => {
    const f = await twoGroups();
    rcv.set('v-500', { answer: () => ({ status: 500, body: '{"verdict":"pass"}' }) });
    const run = await post(api, `/v1/apps/${f.app.app_id}/branches/${f.branch.app_branch_id}/runs`, {
      app_config_id: f.v2.app_config_id,
      skip_builds: true,
      verification: [{ url: rcv.hook('v-500'), interval: '10s', failure_limit: 2 }],
    });
    const W = run.workflow_id;
    await approve(api, W, 'g1');
    await waitFor(() => rcv.at('v-500').length === 1, 10_000, 'the first request');
    await answered(W, 'g1', 1);
    clock.advance(10_000);
    const done = await waitWf(api, W);
    expect(done.status).toBe('failed');
    expect(rcv.at('v-500')).toHaveLength(2);
    expect(done.steps.find((s: Json) => s.name === 'verify install group: g1').error).toMatch(
      /failed 2 times in a row \(last: HTTP 500\)$/,
    );
  });

  it('with a health gate: deploy, then verify, then bake; the group moves on once the verification passed and then the bake elapsed', {
    timeout: 60_000,
  }, async () => {
    const f = await twoGroups();
    rcv.set('v-gated', { answer: () => ({ status: 200, body: '{"verdict":"pass"}' }) });
    const run = await post(api, `/v1/apps/${f.app.app_id}/branches/${f.branch.app_branch_id}/runs`, {
      app_config_id: f.v2.app_config_id,
      skip_builds: true,
      health_gate: { bake: '1m' },
      verification: [{ url: rcv.hook('v-gated') }],
    });
    const W = run.workflow_id;
    await approve(api, W, 'g1');
    const { wf } = await waitStep(api, W, 'bake install group: g1', 'started');
    expect(wf.steps.map((s: Json) => [s.name, s.status]).slice(1, 5)).toEqual([
      ['plan install group: g1', 'succeeded'],
      ['deploy install group: g1', 'succeeded'],
      ['verify install group: g1', 'succeeded'],
      ['bake install group: g1', 'started'],
    ]);
    expect(rcv.at('v-gated')).toHaveLength(1);
    clock.advance(60_000);
    await waitStep(api, W, 'plan install group: g2', 'awaiting_approval');
    await post(api, `/v1/workflows/${W}/cancel`, undefined, 200);
  });

  it('bad verification input is 400 and starts nothing', async () => {
    const f = await twoGroups();
    const runs = `/v1/apps/${f.app.app_id}/branches/${f.branch.app_branch_id}/runs`;
    const url = rcv.hook('never');
    const bad = [
      [{ url, interval: '5s' }],
      [{ url, interval: '11m' }],
      [{ url, timeout: '31s' }],
      [{ url, max_wait: '30s' }],
      [{ url, failure_limit: 0 }],
      [{ url, failure_limit: 11 }],
      [{ url: 'ftp://example.com/x' }],
      [{ url, extra: true }],
      Array.from({ length: 6 }, () => ({ url })),
      [],
    ];
    for (const verification of bad) {
      const r = await api.post(runs, { app_config_id: f.v2.app_config_id, verification });
      expect(r.status, JSON.stringify(verification)).toBe(400);
      expect(r.body).toMatchObject({ error: expect.any(String), message: expect.any(String) });
    }
    const rb = await api.post(`/v1/apps/${f.app.app_id}/rollbacks`, { to: f.v1.app_config_id, verification: [{ url, interval: '1s' }] });
    expect(rb.status).toBe(400);
    expect(rcv.at('never')).toHaveLength(0);
  });
});

describe('verification gates: the target guard', () => {
  let guarded: TestService;
  afterEach(async () => {
    await guarded?.stop();
  });

  it('without --allow-private-targets a private target is refused: each request counts one failure, and the group fails; nothing ' +
    'reaches it', {
    timeout: 60_000,
  }, async () => {
    const gclock = new ManualClock(Date.now());
    guarded = await startService({ allowPrivateTargets: false }, { clock: gclock });
    const gorg = guarded.createOrg('guarded');
    const gapi = guarded.api(gorg);
    const f = await twoGroups(gapi);
    const run = await post(gapi, `/v1/apps/${f.app.app_id}/branches/${f.branch.app_branch_id}/runs`, {
      app_config_id: f.v2.app_config_id,
      skip_builds: true,
      verification: [{ url: rcv.hook('v-private'), interval: '10s', failure_limit: 2 }],
    });
    await approve(gapi, run.workflow_id, 'g1');
    const stepOf = () => listSteps(guarded.server.ctx.db, run.workflow_id).find((s) => s.name === 'verify install group: g1');
    await waitFor(() => !!verifySnapshotOf(stepOf()?.params ?? {})?.context.checks[0].last, 10_000, 'the first refusal recorded');
    expect(verifySnapshotOf(stepOf()!.params)!.context.checks[0]).toMatchObject({
      attempt: 1,
      failures: 1,
      last: { verdict: 'error', status: null, error: 'target refused: loopback address' },
    });
    gclock.advance(10_000);
    const done = await waitWf(gapi, run.workflow_id);
    expect(done.status).toBe('failed');
    expect(done.steps.find((s: Json) => s.name === 'verify install group: g1').error).toMatch(
      /failed 2 times in a row \(last: target refused: loopback address\)$/,
    );
    expect(rcv.at('v-private')).toHaveLength(0);
  });
});

describe('verification gates: kill -9', () => {
  afterAll(() => {
    for (const c of children) c.kill('SIGKILL');
  });

  it('a svc killed with SIGKILL while it waits between two requests polls again within one interval after the restart, counting on', {
    timeout: 90_000,
  }, async () => {
    const { db, org: corg } = newDbWithOrg('verify-crash');
    const first = await spawnService(db);
    const capi = apiClient(first.url, corg);
    const f = await twoGroups(capi);
    rcv.set('v-crash', { answer: () => ({ status: 200, body: '{"verdict":"pending"}' }) });
    const run = await post(capi, `/v1/apps/${f.app.app_id}/branches/${f.branch.app_branch_id}/runs`, {
      app_config_id: f.v2.app_config_id,
      skip_builds: true,
      verification: [{ url: rcv.hook('v-crash'), secret: SECRET, interval: '10s' }],
    });
    await approve(capi, run.workflow_id, 'g1');
    await waitFor(() => rcv.at('v-crash').length === 1, 15_000, 'the first request');
    await waitFor(() => gateInFile(db, run.workflow_id, 'g1')?.context.checks[0].last ?? null, 15_000, 'its answer recorded');
    first.proc.kill('SIGKILL');
    expect((await first.exited).signal).toBe('SIGKILL');
    const second = await spawnService(db);
    await waitFor(() => rcv.at('v-crash').length === 2, 15_000, 'a request after the restart');
    const [a, b] = rcv.at('v-crash');
    expect(b.at - a.at).toBeLessThanOrEqual(10_000 + 1500); // within one interval of the last request
    expect(b.at - a.at).toBeGreaterThanOrEqual(9_000); // the schedule held, not a burst at start
    expect(verified(b).data.rollout.attempt).toBe(2);
    second.proc.kill('SIGKILL');
  });
});
