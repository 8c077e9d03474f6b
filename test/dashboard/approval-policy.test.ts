// The dashboard under an approval policy (CONTRACT 10.4), over plain HTTP: the approvals page and the
// run page show each rule "k of n" with who approved and when; a token no rule admits, and the
// token that started the run, see why they may not answer instead of the form; an approver answers
// through the form and the count moves.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startService, waitFor, type ApiClient, type OrgCreds, type TestService } from '../helpers/service.ts';
import { dashboardSession } from '../helpers/dashboard.ts';
import { get, post, waitWf } from '../helpers/workflows.ts';

type Json = any;

let svc: TestService;
let org: OrgCreds;
let admin: ApiClient;
let dash: string;
const tok: Record<string, OrgCreds & { token_id: string }> = {};
let runId: string;
let stepId: string;

const text = (html: string) =>
  html
    .replace(/<[^>]+>/g, ' ')
    .replace(/&amp;/g, '&')
    .replace(/&#39;/g, "'")
    .replace(/\s+/g, ' ');

beforeAll(async () => {
  svc = await startService();
  dash = `${svc.url}/dashboard`;
  org = svc.createOrg('dash-approvals');
  admin = svc.api(org);
  tok.sreA = svc.createToken(org, 'deploy', 'sre-a');
  tok.intern = svc.createToken(org, 'deploy', 'intern');
  tok.release = svc.createToken(org, 'deploy', 'release');
  const appId = (await post(admin, '/v1/apps', { name: 'shop' })).app_id;
  await post(admin, `/v1/apps/${appId}/configs`, { components: [{ name: 'api' }] });
  const install = await post(admin, '/v1/installs', { app_id: appId, name: 'eu-1' });
  const wfs = await waitFor(
    async () => {
      const l = await get(admin, `/v1/installs/${install.install_id}/workflows`);
      return l.length ? l : null;
    },
    10_000,
    'the provision workflow',
  );
  await waitWf(admin, wfs[0].workflow_id);
  const put = await admin.raw('PUT', `/v1/apps/${appId}/approval-policy`, {
    body: JSON.stringify({
      rules: [
        { name: 'sre', required: 2, approvers: { token_names: ['sre-a', 'sre-b', 'release'] } },
        { name: 'admin', required: 1, approvers: { scopes: ['admin'] } },
      ],
      expires_after: '1d',
    }),
    headers: { 'content-type': 'application/json' },
  });
  expect(put.status).toBe(200);
  const v2 = await post(admin, `/v1/apps/${appId}/configs`, { components: [{ name: 'api', values: { v: 2 } }] });
  const branch = await post(admin, `/v1/apps/${appId}/branches`, {
    name: 'main',
    install_groups: [{ name: 'ring-0', install_ids: [install.install_id] }],
  });
  const run = await post(svc.api(tok.release), `/v1/apps/${appId}/branches/${branch.app_branch_id}/runs`, {
    app_config_id: v2.app_config_id,
    skip_builds: true,
  });
  runId = run.workflow_id;
  stepId = (
    await waitFor(
      async () => (await get(admin, `/v1/workflows/${runId}`)).steps.find((s: Json) => s.status === 'awaiting_approval') ?? null,
      10_000,
      'the plan to await approval',
    )
  ).step_id;
});
afterAll(async () => svc.stop());

describe('approval policy in the dashboard', () => {
  it('shows each rule k of n; a non-approver and the starter see why instead of the form; an approver answers and the count moves', async () => {
    const intern = await dashboardSession(dash, tok.intern);
    const html = await (await intern.get(`/${org.org_id}/approvals`)).text();
    const page = text(html);
    expect(page).toContain('sre : 0 of 2');
    expect(page).toContain('admin : 0 of 1');
    expect(page).toMatch(/Expires .* \(then the step fails approval_expired\)/);
    expect(page).toContain("You may not answer this step: no rule of this step's approval policy admits your token (rules: sre, admin)");
    expect(html).not.toContain('value="approved"');

    const release = await dashboardSession(dash, tok.release);
    const runPage = text(await (await release.get(`/${org.org_id}/workflows/${runId}`)).text());
    expect(runPage).toContain('You may not answer this step: your token started this run, and its approval policy prevents self-approval');

    const sre = await dashboardSession(dash, tok.sreA);
    const form = await sre.get(`/${org.org_id}/approvals`);
    expect(await form.text()).toContain('value="approved"');
    const res = await sre.submit(`/${org.org_id}/approvals`, `/${org.org_id}/workflows/${runId}/steps/${stepId}/approval`, {
      response: 'approved',
      note: 'ok by me',
      back: 'approvals',
    });
    expect(res.status).toBe(303);
    const after = text(await (await sre.get(`/${org.org_id}/workflows/${runId}`)).text());
    expect(after).toMatch(/sre : 1 of 2 · sre-a tok_\w+/);
    expect(after).toContain('You may not answer this step: your token already answered this step (approved)');
    expect((await get(admin, `/v1/workflows/${runId}`)).steps.find((s: Json) => s.step_id === stepId).status).toBe('awaiting_approval');
  });
});
