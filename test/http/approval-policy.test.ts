// Approval policies over HTTP (CONTRACT 10.4 and 3): PUT/GET/DELETE /v1/apps/{app}/approval-policy
// with its 400s naming the rule, a branch run naming a stricter policy, answered by real tokens:
// the starter is 403 self_approval, a token no rule admits 403 not_an_approver (both kept in the
// audit log), a repeated answer 200 counted once, and the step's approval view shows each rule as
// k of n with who and when; the events carry response_recorded and the decision's rule.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startService, waitFor, type ApiClient, type OrgCreds, type TestService } from '../helpers/service.ts';
import { get, post, waitWf } from '../helpers/workflows.ts';
import { startReceiver } from '../helpers/receiver.ts';

type Json = any;

let svc: TestService;
let org: OrgCreds;
let admin: ApiClient;
let appId: string;
let firstConfig: string;
const installs: string[] = [];
const tok: Record<string, OrgCreds & { token_id: string }> = {};

const put = (api: ApiClient, p: string, body: unknown) =>
  api.raw('PUT', p, { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });

beforeAll(async () => {
  svc = await startService();
  org = svc.createOrg('approvals');
  admin = svc.api(org);
  tok.sreA = svc.createToken(org, 'deploy', 'sre-a');
  tok.sreB = svc.createToken(org, 'deploy', 'sre-b');
  tok.boss = svc.createToken(org, 'admin', 'boss');
  tok.intern = svc.createToken(org, 'deploy', 'intern');
  tok.release = svc.createToken(org, 'deploy', 'release');
  appId = (await post(admin, '/v1/apps', { name: 'shop' })).app_id;
  firstConfig = (await post(admin, `/v1/apps/${appId}/configs`, { components: [{ name: 'api' }] })).app_config_id;
  for (const name of ['eu-1', 'eu-2']) {
    const install = await post(admin, '/v1/installs', { app_id: appId, name });
    installs.push(install.install_id);
    const wfs = await waitFor(
      async () => {
        const l = await get(admin, `/v1/installs/${install.install_id}/workflows`);
        return l.length ? l : null;
      },
      10_000,
      'the provision workflow',
    );
    await waitWf(admin, wfs[0].workflow_id);
  }
});
afterAll(async () => svc.stop());

const POLICY = {
  rules: [
    { name: 'sre', required: 2, approvers: { token_names: ['sre-a', 'sre-b', 'sre-c'] } },
    { name: 'admin', required: 1, approvers: { scopes: ['admin'] } },
  ],
};

describe('an app approval policy', () => {
  it('PUT validates with 400s naming the rule; GET is 404 without one; PUT answers 200 with the policy; DELETE removes it', async () => {
    const path = `/v1/apps/${appId}/approval-policy`;
    expect((await admin.get(path)).status).toBe(404);
    const bad = async (body: unknown, needle: RegExp) => {
      const r = await put(admin, path, body);
      expect(r.status, r.text).toBe(400);
      expect(r.body.error).toBe('invalid_request');
      expect(JSON.stringify(r.body)).toMatch(needle);
    };
    await bad({ rules: [{ name: 'x', required: 0, approvers: { scopes: ['admin'] } }] }, /rules\.0\.required|rules.*required/);
    await bad({ rules: [{ name: 'x', required: 11, approvers: { scopes: ['admin'] } }] }, /required/);
    await bad({ rules: [{ name: 'lonely', required: 1, approvers: {} }] }, /rule lonely: approvers names no/);
    await bad(
      { rules: [{ name: 'ghosts', required: 1, approvers: { token_ids: ['tok_nope'] } }] },
      /rule ghosts: tok_nope is not a live token/,
    );
    await bad({ rules: [{ name: 'readers', required: 1, approvers: { scopes: ['read'] } }] }, /rule readers: no token can ever satisfy it/);
    await bad({ ...POLICY, expires_after: '30s' }, /expires_after/);
    await bad({ ...POLICY, expires_after: '31d' }, /from 1m to 30d/);
    await bad({ ...POLICY, reject: 'some' }, /reject/);
    expect((await admin.get(path)).status).toBe(404);

    // token_names may name tokens made later
    const ok = await put(admin, path, { ...POLICY, expires_after: '2h' });
    expect(ok.status, ok.text).toBe(200);
    expect(ok.body).toEqual({ ...POLICY, prevent_self_approval: true, expires_after: '2h', reject: 'any', auto_approve: null });
    expect(await get(admin, path)).toEqual(ok.body);
    // a read token may not set it; another org sees no app
    const reader = svc.api(svc.createToken(org, 'read', 'reader'));
    expect((await put(reader, path, POLICY)).status).toBe(403);
    const other = svc.api(svc.createOrg('other'));
    expect((await other.get(path)).status).toBe(404);

    expect((await admin.del(path)).status).toBe(204);
    expect((await admin.get(path)).status).toBe(404);
    expect((await admin.del(path)).status).toBe(404);
    const audit = await get(admin, `/v1/audit?resource_id=${appId}`);
    const actions = audit.data.map((a: Json) => `${a.action} ${a.status}`);
    expect(actions).toContain('approval_policies.put 200');
    expect(actions).toContain('approval_policies.put 400');
    expect(actions).toContain('approval_policies.delete 204');
  });

  it('a branch run naming a policy: self-approval and non-approvers 403, a repeat counted once, approved when both rules are met', async () => {
    const cfg = await post(admin, `/v1/apps/${appId}/configs`, { components: [{ name: 'api', values: { v: 2 } }] });
    const branch = await post(admin, `/v1/apps/${appId}/branches`, {
      name: 'main',
      install_groups: [
        { name: 'ring-0', install_ids: [installs[0]] },
        { name: 'ring-1', install_ids: [installs[1]] },
      ],
    });
    const release = svc.api(tok.release);
    const badRun = await release.post(`/v1/apps/${appId}/branches/${branch.app_branch_id}/runs`, {
      app_config_id: cfg.app_config_id,
      skip_builds: true,
      approval_policy: { rules: [{ name: 'ghosts', required: 1, approvers: { token_ids: ['tok_nope'] } }] },
    });
    expect(badRun.status).toBe(400);
    expect(badRun.text).toMatch(/rule ghosts/);

    const run = await post(release, `/v1/apps/${appId}/branches/${branch.app_branch_id}/runs`, {
      app_config_id: cfg.app_config_id,
      skip_builds: true,
      approval_policy: { ...POLICY, rules: [...POLICY.rules, { name: 'release', required: 1, approvers: { token_names: ['release'] } }] },
    });
    const step = await waitFor(
      async () => (await get(admin, `/v1/workflows/${run.workflow_id}`)).steps.find((s: Json) => s.status === 'awaiting_approval') ?? null,
      10_000,
      'the first plan to await approval',
    );
    expect(step.name).toBe('plan install group: ring-0');
    const answer = (who: OrgCreds, response = 'approved') =>
      svc.api(who).post(`/v1/workflows/${run.workflow_id}/steps/${step.step_id}/approval`, {
        response,
        note: `from ${who === tok.boss ? 'boss' : 'x'}`,
      });

    // a rule admits the starter by name, yet it may not approve its own run (prevent_self_approval by default)
    const self = await answer(tok.release);
    expect(self.status).toBe(403);
    expect(self.body).toMatchObject({ error: 'self_approval' });
    const intern = await answer(tok.intern);
    expect(intern.status).toBe(403);
    expect(intern.body.error).toBe('not_an_approver');
    expect(intern.body.message).toMatch(/rules: sre, admin, release/);
    const audit = await get(admin, `/v1/audit?resource_id=${step.step_id}`);
    expect(audit.data.map((a: Json) => `${a.actor.token_name} ${a.action} ${a.status}`)).toEqual([
      'release steps.approve 403',
      'intern steps.approve 403',
    ]);
  });

  it('2 of sre and 1 admin: the step shows k of n, a repeat counts once, and the run goes on exactly when both are met', async () => {
    const cfg = await post(admin, `/v1/apps/${appId}/configs`, { components: [{ name: 'api', values: { v: 2 } }] });
    const branch = await post(admin, `/v1/apps/${appId}/branches`, {
      name: 'two',
      install_groups: [
        { name: 'ring-0', install_ids: [installs[0]] },
        { name: 'ring-1', install_ids: [installs[1]] },
      ],
    });
    const run = await post(svc.api(tok.release), `/v1/apps/${appId}/branches/${branch.app_branch_id}/runs`, {
      app_config_id: cfg.app_config_id,
      skip_builds: true,
      approval_policy: POLICY,
    });
    const first = await waitFor(
      async () => (await get(admin, `/v1/workflows/${run.workflow_id}`)).steps.find((s: Json) => s.status === 'awaiting_approval') ?? null,
      10_000,
      'the first plan to await approval',
    );
    const path = `/v1/workflows/${run.workflow_id}/steps/${first.step_id}/approval`;
    const say = (who: OrgCreds) => svc.api(who).post(path, { response: 'approved', note: 'lgtm' });
    expect((await say(tok.sreA)).status).toBe(200);
    const again = await say(tok.sreA);
    expect(again.status).toBe(200);
    expect(again.body.status).toBe('awaiting_approval');
    expect(again.body.approval.rules).toEqual([
      {
        name: 'sre',
        required: 2,
        approvals: [{ responded_by: { token_id: tok.sreA.token_id, token_name: 'sre-a' }, at: expect.any(String), note: 'lgtm' }],
      },
      { name: 'admin', required: 1, approvals: [] },
    ]);
    expect((await say(tok.boss)).body.status).toBe('awaiting_approval');
    const last = await say(tok.sreB);
    expect(last.status).toBe(200);
    expect(last.body).toMatchObject({ status: 'succeeded', approval: { status: 'approved', decided_by_rule: 'sre' } });
    const second = await waitFor(
      async () => (await get(admin, `/v1/workflows/${run.workflow_id}`)).steps.find((s: Json) => s.status === 'awaiting_approval') ?? null,
      10_000,
      'the second plan to await approval',
    );
    expect(second.name).toBe('plan install group: ring-1');

    const events = (await svc.events(org.org_id)).filter(
      (e) => e.type === 'com.svc.workflow_step.approval.v1' && e.data.step.id === first.step_id,
    );
    expect(events.map((e) => e.subject.split('/').at(-1))).toEqual([
      'requested',
      'response_recorded',
      'response_recorded',
      'response_recorded',
      'approved',
    ]);
    expect(events[1].data.approval).toMatchObject({
      status: 'requested',
      response: 'approved',
      responded_by: { token_name: 'sre-a' },
      rules: [
        { name: 'sre', required: 2, approved: 1 },
        { name: 'admin', required: 1, approved: 0 },
      ],
    });
    expect(events[4].data.approval).toMatchObject({ status: 'approved', decided_by_rule: 'sre', responded_by: { token_name: 'sre-b' } });
  });

  it("a fleet rollback naming a policy: its starter may not approve, a token the run's rule admits decides", async () => {
    const release = svc.api(tok.release);
    const started = await release.post(`/v1/apps/${appId}/rollbacks`, {
      to: firstConfig,
      install_ids: [installs[0]],
      approval_policy: { rules: [{ name: 'ops', required: 1, approvers: { scopes: ['deploy'] } }], expires_after: '1h' },
    });
    expect(started.status, started.text).toBe(201);
    const wfId = started.body.workflow_id;
    const step = await waitFor(
      async () => (await get(admin, `/v1/workflows/${wfId}`)).steps.find((s: Json) => s.status === 'awaiting_approval') ?? null,
      10_000,
      'the rollback plan to await approval',
    );
    expect(step.approval).toMatchObject({ rules: [{ name: 'ops', required: 1, approvals: [] }], expires_at: expect.any(String) });
    const path = `/v1/workflows/${wfId}/steps/${step.step_id}/approval`;
    expect((await release.post(path, { response: 'approved' })).body.error).toBe('self_approval');
    const ok = await svc.api(tok.sreA).post(path, { response: 'approved' });
    expect(ok.body).toMatchObject({ status: 'succeeded', approval: { decided_by_rule: 'ops' } });
  });

  it('response_recorded goes to the webhooks that approval responses go to (event:approval.response.recorded), not to request-only ones', async () => {
    const receiver = await startReceiver();
    try {
      const hook = (name: string, flags: Record<string, boolean>) =>
        post(admin, '/v1/orgs/current/webhooks', {
          webhook_url: receiver.hook(name),
          interests: { resources: { app_branches: { outcome: 'none', ...flags } } },
        });
      await hook('responses', { approval_responses: true });
      await hook('requests', { approval_requests: true });
      const cfg = await post(admin, `/v1/apps/${appId}/configs`, { components: [{ name: 'api', values: { v: 3 } }] });
      const branch = await post(admin, `/v1/apps/${appId}/branches`, {
        name: 'hooks',
        install_groups: [{ name: 'ring-0', install_ids: [installs[0]] }],
      });
      const run = await post(svc.api(tok.release), `/v1/apps/${appId}/branches/${branch.app_branch_id}/runs`, {
        app_config_id: cfg.app_config_id,
        skip_builds: true,
        approval_policy: POLICY,
      });
      const step = await waitFor(
        async () =>
          (await get(admin, `/v1/workflows/${run.workflow_id}`)).steps.find((s: Json) => s.status === 'awaiting_approval') ?? null,
        10_000,
        'the plan to await approval',
      );
      for (const who of [tok.sreA, tok.boss, tok.sreB]) {
        const r = await svc.api(who).post(`/v1/workflows/${run.workflow_id}/steps/${step.step_id}/approval`, { response: 'approved' });
        expect(r.status, r.text).toBe(200);
      }
      const mine = (name: string) => receiver.at(name).filter((r) => r.json.data?.step?.id === step.step_id);
      await waitFor(async () => mine('responses').length >= 4 || null, 10_000, 'the responses webhook to get 4 events');
      // delivery to one webhook is not ordered (its attempts run side by side): the set, not the order, is asserted here
      expect(
        mine('responses')
          .map((r) => r.json.subject.split('/').at(-1))
          .sort(),
      ).toEqual(['approved', 'response_recorded', 'response_recorded', 'response_recorded']);
      await waitFor(async () => mine('requests').length >= 1 || null, 10_000, 'the requests webhook to get the request');
      await svc.settled();
      expect(mine('requests').map((r) => r.json.subject.split('/').at(-1))).toEqual(['requested']);
    } finally {
      await receiver.close();
    }
  });
});
