// The dashboard's side of issue 31 (CONTRACT 2 "Scopes and actors"), in headless Chromium (pages
// checked by axe-core): a session has the scope of the token it signed in with and the pages hide
// what it cannot do (a write posted anyway is 403 and kept in the audit log); the run's page shows
// who started it and who approved; the app page who vetoed; the audit page (admin only) lists the
// changes with their actors; the token page creates a token of a chosen scope.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { startService, waitFor, type ApiClient, type OrgCreds, type TestService } from '../helpers/service.ts';
import { expectAccessible, launchBrowser, screenshot, signedInPage } from '../helpers/browser.ts';
import { dashboardSession } from '../helpers/dashboard.ts';
import { startReceiver, type Receiver } from '../helpers/receiver.ts';
import { get, post, waitStep, waitWf } from '../helpers/workflows.ts';

type Json = any;

let svc: TestService;
let receiver: Receiver;
let browser: Browser;
let dash: string;
let org: OrgCreds;
let admin: ApiClient;
let oncall: OrgCreds & { token_id: string };
let ciDeploy: OrgCreds & { token_id: string };
let statusPage: OrgCreds & { token_id: string };
let appId: string;
let v1: string;
let run: { run_id: string; workflow_id: string };
let stepId: string;
const contexts: BrowserContext[] = [];

async function pageAs(who: OrgCreds): Promise<Page> {
  const { context, page } = await signedInPage(browser, dash, who);
  contexts.push(context);
  return page;
}

beforeAll(async () => {
  [svc, browser, receiver] = await Promise.all([startService(), launchBrowser(), startReceiver()]);
  dash = `${svc.url}/dashboard`;
  org = svc.createOrg('dash-scopes');
  admin = svc.api(org);
  oncall = svc.createToken(org, 'deploy', 'oncall');
  ciDeploy = svc.createToken(org, 'deploy', 'ci-deploy');
  statusPage = svc.createToken(org, 'read', 'status-page');
  await post(admin, '/v1/orgs/current/webhooks', { webhook_url: receiver.hook('all') });
  const D = svc.api(ciDeploy);
  appId = (await post(D, '/v1/apps', { name: 'shop' })).app_id;
  v1 = (await post(D, `/v1/apps/${appId}/configs`, { components: [{ name: 'api', values: { v: 1 } }] })).app_config_id;
  const install = await post(D, '/v1/installs', { app_id: appId, name: 'eu-1', app_config_id: v1 });
  const provision = await waitFor(async () => (await get(D, `/v1/installs/${install.install_id}/workflows`))[0], 10_000, 'provision');
  await waitWf(D, provision.workflow_id);
  const v2 = (await post(D, `/v1/apps/${appId}/configs`, { components: [{ name: 'api', values: { v: 2 } }] })).app_config_id;
  await waitWf(D, (await post(D, `/v1/installs/${install.install_id}/app-config-updates`, { app_config_id: v2 })).workflow_id);
  run = await post(D, `/v1/apps/${appId}/rollbacks`, { to: 'previous' });
  stepId = (await waitStep(D, run.workflow_id, 'plan install group: other', 'awaiting_approval')).step.step_id;
}, 60_000);

afterAll(async () => {
  for (const c of contexts) await c.close();
  await browser?.close();
  await svc?.stop();
  await receiver?.close();
});

describe('a read session', () => {
  it('sees no write it cannot make: no approve, cancel, new webhook, veto or rollback; no audit link', async () => {
    const page = await pageAs(statusPage);
    await page.goto(`${dash}/${org.org_id}/workflows/${run.workflow_id}`);
    await expect(page.getByRole('button', { name: 'Approve' }).count()).resolves.toBe(0);
    await expect(page.getByRole('button', { name: 'Cancel workflow' }).count()).resolves.toBe(0);
    await expect(
      page.getByText("Approving or rejecting needs a token with scope deploy or admin; this session's token has scope read.").count(),
    ).resolves.toBe(1);
    await expect(page.getByText(/Started by/).count()).resolves.toBe(1);
    await expectAccessible(page, 'workflow page, read session');
    await screenshot(page, 'scopes-read-workflow');
    await page.screenshot({ path: '/tmp/scopes-read-workflow.png', fullPage: true });
    await expect(page.getByRole('link', { name: 'Audit', exact: true }).count()).resolves.toBe(0);
    await page.goto(`${dash}/${org.org_id}/webhooks`);
    await expect(page.getByRole('link', { name: 'New webhook' }).count()).resolves.toBe(0);
    await expect(page.getByRole('button', { name: /Send test event/ }).count()).resolves.toBe(0);
    await page.goto(`${dash}/${org.org_id}/apps/${appId}`);
    await expect(page.getByRole('button', { name: /^Veto/ }).count()).resolves.toBe(0);
    await expect(page.getByText(/Rolling back the fleet needs a token with scope deploy/).count()).resolves.toBe(1);
    await page.goto(`${dash}/${org.org_id}/settings`);
    await expect(page.getByRole('button', { name: 'Create token' }).count()).resolves.toBe(0);
    const audit = await page.goto(`${dash}/${org.org_id}/audit`);
    expect(audit?.status()).toBe(403);
  });

  it('a write posted anyway is 403 naming the scope, changes nothing, and is kept in the audit log', async () => {
    const s = await dashboardSession(dash, statusPage);
    const r = await s.submit(
      `/${org.org_id}/workflows/${run.workflow_id}`,
      `/${org.org_id}/workflows/${run.workflow_id}/steps/${stepId}/approval`,
      { response: 'approved' },
    );
    expect(r.status).toBe(403);
    expect(await r.text()).toMatch(/needs a token with scope deploy/);
    expect((await get(admin, `/v1/workflows/${run.workflow_id}`)).steps.find((x: Json) => x.step_id === stepId).status).toBe(
      'awaiting_approval',
    );
    const log = (await get(admin, `/v1/audit?actor=${statusPage.token_id}`)).data;
    expect(log).toContainEqual(
      expect.objectContaining({
        action: 'steps.approve',
        resource_id: stepId,
        status: 403,
        actor: { token_id: statusPage.token_id, token_name: 'status-page' },
      }),
    );
    // a form that does not validate is refused before any change, as the API refuses it, the scope first
    const veto = await s.submit(`/${org.org_id}/apps/${appId}`, `/${org.org_id}/apps/${appId}/configs/${v1}/veto`, { reason: '' });
    expect(veto.status).toBe(403);
    const d = await dashboardSession(dash, ciDeploy);
    expect((await d.submit(`/${org.org_id}/apps/${appId}`, `/${org.org_id}/apps/${appId}/configs/${v1}/veto`, { reason: '' })).status).toBe(
      303,
    );
    const vetoes = (await get(admin, `/v1/audit?action=configs.veto&resource_id=${v1}`)).data.map((e: Json) => [
      e.actor.token_name,
      e.status,
    ]);
    expect(vetoes).toEqual([
      ['status-page', 403],
      ['ci-deploy', 400],
    ]);
  });
});

describe('a deploy session', () => {
  it('approves from the run page, which then shows who started the run and who approved; vetoes, and the app page says by whom', async () => {
    const page = await pageAs(oncall);
    await page.goto(`${dash}/${org.org_id}/workflows/${run.workflow_id}`);
    await page.getByLabel('Note (optional)').fill('checked the plan');
    await Promise.all([page.waitForURL(/workflows/), page.getByRole('button', { name: 'Approve' }).click()]);
    await waitWf(admin, run.workflow_id);
    await page.goto(`${dash}/${org.org_id}/workflows/${run.workflow_id}`);
    const startedBy = await page.locator('#started-by').innerText();
    expect(startedBy).toContain('ci-deploy');
    expect(startedBy).toContain('rollbacks.create');
    const answered = page.locator(`#step-${stepId} .responded-by`);
    expect(await answered.innerText()).toContain('oncall');
    expect(await answered.innerText()).toContain(oncall.token_id);
    await expectAccessible(page, 'workflow page after approval');
    await screenshot(page, 'scopes-approved-run');
    await page.screenshot({ path: '/tmp/scopes-approved-run.png', fullPage: true });
    // the response event and GET workflow carry the same actor
    const step = (await get(admin, `/v1/workflows/${run.workflow_id}`)).steps.find((x: Json) => x.step_id === stepId);
    expect(step.approval.responded_by).toEqual({ token_id: oncall.token_id, token_name: 'oncall' });

    await page.goto(`${dash}/${org.org_id}/apps/${appId}`);
    await page.getByLabel(/Reason for vetoing config v1/).fill('broke eu-1');
    await Promise.all([page.waitForURL(/apps/), page.getByRole('button', { name: /Veto config v1/ }).click()]);
    const row = page.locator(`#config-${v1}`);
    expect(await row.innerText()).toMatch(/vetoed[\s\S]*broke eu-1[\s\S]*by oncall/);
    // a deploy session has no token page powers and no audit log
    await page.goto(`${dash}/${org.org_id}/settings`);
    await expect(page.getByRole('button', { name: 'Create token' }).count()).resolves.toBe(0);
  });
});

describe('a webhooks session', () => {
  it('recovers from the webhook page; the recovery page says who started it', async () => {
    const hooks = svc.createToken(org, 'webhooks', 'ci-hooks');
    const webhookId = (await get(admin, '/v1/orgs/current/webhooks'))[0].webhook_id;
    const s = await dashboardSession(dash, hooks);
    const r = await s.submit(`/${org.org_id}/webhooks/${webhookId}`, `/${org.org_id}/webhooks/${webhookId}/recover`, {
      since: '1h',
      only_failed: '1',
    });
    expect(r.status).toBe(303);
    const at = r.headers.get('location')!;
    expect(at).toMatch(/\/recoveries\/rcv_/);
    const html = await (await s.get(at.slice(at.indexOf(`/${org.org_id}/`)))).text();
    expect(html).toMatch(/Started by[\s\S]*ci-hooks/);
    const rcv = at.slice(at.lastIndexOf('/') + 1);
    expect((await get(admin, `/v1/audit?resource_id=${rcv}`)).data).toEqual([
      expect.objectContaining({ action: 'webhooks.recover', status: 202, actor: { token_id: hooks.token_id, token_name: 'ci-hooks' } }),
    ]);
  });
});

describe('an admin session', () => {
  it('reads the audit page: each change with its actor, refused ones marked; filters by token', async () => {
    const page = await pageAs(org);
    await page.goto(`${dash}/${org.org_id}`);
    await Promise.all([page.waitForURL(/\/audit$/), page.getByRole('link', { name: 'Audit', exact: true }).click()]);
    const table = await page.locator('#audit').innerText();
    expect(table).toMatch(/ci-deploy[\s\S]*rollbacks\.create/);
    expect(table).toMatch(/oncall[\s\S]*steps\.approve/);
    expect(table).toMatch(/status-page[\s\S]*steps\.approve[\s\S]*403 refused/);
    expect(table).toMatch(/oncall[\s\S]*configs\.veto/);
    await expectAccessible(page, 'audit page');
    await screenshot(page, 'scopes-audit');
    await page.screenshot({ path: '/tmp/scopes-audit.png', fullPage: true });
    await page.getByLabel('Token ID').fill(oncall.token_id);
    await Promise.all([page.waitForURL(/actor=/), page.getByRole('button', { name: 'Filter' }).click()]);
    const mine = await page.locator('#audit tbody').innerText();
    expect(mine).toContain('oncall');
    expect(mine).not.toContain('ci-deploy');
  });

  it('the audit page is newest first; "Oldest first" turns it, keeping the filter, and "Newest first" turns it back', async () => {
    const page = await pageAs(org);
    const ids = () => page.locator('#audit tbody tr').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-audit-id')));
    const api = (await get(admin, '/v1/audit?limit=500')).data.map((e: Json) => e.id) as string[]; // oldest first (CONTRACT 4.5)
    expect(api.length).toBeGreaterThan(3);
    expect(api.length).toBeLessThan(100); // one page of the dashboard's
    await page.goto(`${dash}/${org.org_id}/audit`);
    expect(await ids()).toEqual([...api].reverse());
    await Promise.all([page.waitForURL(/order=oldest/), page.getByRole('link', { name: 'Oldest first' }).click()]);
    expect(await ids()).toEqual(api);
    await expectAccessible(page, 'audit page, oldest first');
    // a filter keeps the order
    await page.getByLabel('Token ID').fill(oncall.token_id);
    await Promise.all([page.waitForURL(/actor=/), page.getByRole('button', { name: 'Filter' }).click()]);
    expect(page.url()).toContain('order=oldest');
    const mine = (await get(admin, `/v1/audit?actor=${oncall.token_id}`)).data.map((e: Json) => e.id) as string[];
    expect(mine.length).toBeGreaterThan(1);
    expect(await ids()).toEqual(mine);
    await Promise.all([page.waitForURL((u) => !u.search.includes('order=')), page.getByRole('link', { name: 'Newest first' }).click()]);
    expect(page.url()).toContain('actor=');
    expect(await ids()).toEqual([...mine].reverse());
  });

  it("creates a token of a chosen scope on the token page; the table shows each token's scope", async () => {
    const page = await pageAs(org);
    await page.goto(`${dash}/${org.org_id}/settings`);
    await page.getByLabel('Name (optional)').fill('grafana');
    await page.getByLabel('Scope').selectOption('read');
    await page.getByRole('button', { name: 'Create token' }).click();
    await expect(page.getByText(/created with scope read/).count()).resolves.toBe(1);
    const token = await page.locator('#new-token').inputValue();
    const made = svc.api({ org_id: org.org_id, api_token: token });
    expect((await made.get('/v1/apps')).status).toBe(200);
    expect((await made.post('/v1/apps', { name: 'nope' })).status).toBe(403);
    const rows = await page.locator('table').last().innerText();
    expect(rows).toMatch(/grafana[\s\S]*read/);
    expect(rows).toMatch(/oncall[\s\S]*deploy/);
    await expectAccessible(page, 'token page');
    await page.screenshot({ path: '/tmp/scopes-tokens.png', fullPage: true });
    const log = (await get(admin, '/v1/audit?action=tokens.create')).data;
    expect(log).toContainEqual(expect.objectContaining({ resource_type: 'token', status: 201 }));
    expect(JSON.stringify(log)).not.toContain(token);
  });
});
