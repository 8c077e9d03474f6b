// `svc apps approval-policy set|get|clear` and `svc approvals list|respond|link` (CONTRACT 7, 10.4)
// against a real svc: a policy set from a file and from stdin reaches the API as given, a bad one exits
// 1 naming the rule, usage errors exit 2 before any request; the list shows each rule as k/n, respond
// answers as the CLI's token, link prints a one-time URL.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli as cli } from '../helpers/cli.ts';
import { startService, tmpDir, waitFor, type ApiClient, type OrgCreds, type TestService } from '../helpers/service.ts';
import { get, post, waitWf } from '../helpers/workflows.ts';
import { rid } from '../helpers/ids.ts';

type Json = any;

let svc: TestService;
let api: ApiClient;
let org: OrgCreds;
let env: Record<string, string>;

beforeAll(async () => {
  svc = await startService();
  org = svc.createOrg('cli-approvals');
  api = svc.api(org);
  env = { SVC_API_URL: svc.url, SVC_API_TOKEN: org.api_token, SVC_ORG_ID: org.org_id };
}, 30_000);
afterAll(async () => {
  await svc?.stop();
});

describe('svc apps approval-policy and svc approvals', () => {
  it('set (file, stdin), get, clear; list k/n, respond, link', { timeout: 60_000 }, async () => {
    const sre = svc.createToken(org, 'deploy', 'sre-a');
    const app = await post(api, '/v1/apps', { name: rid('shop') });
    await post(api, `/v1/apps/${app.app_id}/configs`, { components: [{ name: 'api', values: { image: 'api:1' } }] });
    const inst = await post(api, '/v1/installs', { app_id: app.app_id, name: rid('acme') });
    const [prov] = await waitFor(
      async () => {
        const l = await get(api, `/v1/installs/${inst.install_id}/workflows`);
        return l.length ? l : null;
      },
      10_000,
      'the provision workflow',
    );
    await waitWf(api, prov.workflow_id);

    // usage errors: exit 2, nothing asked
    expect((await cli(['apps', 'approval-policy', 'set', app.app_id], env)).code).toBe(2);
    expect((await cli(['apps', 'approval-policy', 'set', app.app_id, '--policy', '{nope'], env)).code).toBe(2);
    // the server's refusal: exit 1 with the rule named
    const refused = await cli(
      ['apps', 'approval-policy', 'set', app.app_id, '--policy', '{"rules":[{"name":"empty","required":1,"approvers":{}}]}'],
      env,
    );
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('rule empty');
    expect((await cli(['apps', 'approval-policy', 'get', app.app_id], env)).code).toBe(1);

    const file = path.join(tmpDir(), 'policy.json');
    const policy = {
      rules: [
        { name: 'sre', required: 1, approvers: { token_names: ['sre-a'] } },
        { name: 'admin', required: 1, approvers: { scopes: ['admin'] } },
      ],
      expires_after: '1d',
    };
    fs.writeFileSync(file, JSON.stringify(policy));
    const set = await cli(['apps', 'approval-policy', 'set', app.app_id, '--file', file, '--json'], env);
    expect(set.code, set.stderr).toBe(0);
    expect(set.json).toMatchObject({ ...policy, prevent_self_approval: true, reject: 'any' });
    const fromStdin = await cli(['apps', 'approval-policy', 'set', app.app_id, '--file', '-'], env, JSON.stringify(policy));
    expect(fromStdin.code, fromStdin.stderr).toBe(0);
    expect(fromStdin.stdout).toMatch(/sre\s+1\s+names sre-a/);
    const shown = await cli(['apps', 'approval-policy', 'get', app.app_id], env);
    expect(shown.stdout).toMatch(/expires_after:\s+1d/);

    const v2 = await post(api, `/v1/apps/${app.app_id}/configs`, { components: [{ name: 'api', values: { image: 'api:2' } }] });
    const branch = await post(api, `/v1/apps/${app.app_id}/branches`, {
      name: 'main',
      install_groups: [{ name: 'all', install_ids: [inst.install_id] }],
    });
    const run = await post(api, `/v1/apps/${app.app_id}/branches/${branch.app_branch_id}/runs`, {
      app_config_id: v2.app_config_id,
      skip_builds: true,
    });
    const step = await waitFor(
      async () => (await get(api, `/v1/workflows/${run.workflow_id}`)).steps.find((s: Json) => s.status === 'awaiting_approval') ?? null,
      10_000,
      'the plan to await approval',
    );
    const listed = await cli(['approvals', 'list'], env);
    expect(listed.code).toBe(0);
    expect(listed.stdout).toContain(step.step_id);
    expect(listed.stdout).toContain('sre 0/1, admin 0/1');

    expect((await cli(['approvals', 'respond', run.workflow_id, step.step_id], env)).code).toBe(2);
    const sreEnv = { ...env, SVC_API_TOKEN: sre.api_token };
    const answered = await cli(['approvals', 'respond', run.workflow_id, step.step_id, '--approve', '--note', 'lgtm'], sreEnv);
    expect(answered.code, answered.stderr).toBe(0);
    expect(answered.stdout).toMatch(/rules:\s+sre 1\/1, admin 0\/1/);
    expect(answered.stdout).toContain('sre: sre-a at');

    const link = await cli(
      ['approvals', 'link', run.workflow_id, step.step_id, '--token-id', sre.token_id, '--expires-in', '10m', '--json'],
      env,
    );
    expect(link.code, link.stderr).toBe(0);
    expect(link.json.url).toMatch(/\/approval-links\/[A-Za-z0-9_-]{43}$/);
    // a deploy token may not make links (admin)
    const notAdmin = await cli(['approvals', 'link', run.workflow_id, step.step_id, '--token-id', sre.token_id], sreEnv);
    expect(notAdmin.code).toBe(1);
    expect(notAdmin.stderr).toContain('needs scope admin');

    // the org's token started the run: it may not approve it (prevent_self_approval)
    const self = await cli(['approvals', 'respond', run.workflow_id, step.step_id, '--approve'], env);
    expect(self.code).toBe(1);
    expect(self.stderr).toContain('prevents self-approval');
    const boss = svc.createToken(org, 'admin', 'boss');
    const admin = await cli(['approvals', 'respond', run.workflow_id, step.step_id, '--approve'], {
      ...env,
      SVC_API_TOKEN: boss.api_token,
    });
    expect(admin.stdout).toMatch(/status:\s+succeeded/);
    expect(admin.stdout).toMatch(/decided_by_rule:\s+admin/);

    expect((await cli(['apps', 'approval-policy', 'clear', app.app_id], env)).code).toBe(0);
    expect((await cli(['apps', 'approval-policy', 'get', app.app_id], env)).code).toBe(1);
  });
});
