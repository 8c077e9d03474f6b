// The dashboard (CONTRACT 7, spec 4 behaviour 5): pages driven in headless Chromium (each page
// checked by axe-core: no violations), plus HTTP-level checks of redirects, 404s and CSRF. The
// webhook form's pure parts: webhook-form.test.ts.
import { openDb } from '../../store/db.ts';
import { createToken, lookupToken, revokeToken } from '../../store/orgs.ts';
import { saveDeliveryStatuses } from '../../store/delivery-status.ts';
import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { startService, waitFor, type ApiClient, type OrgCreds, type TestService } from '../helpers/service.ts';
import { startReceiver, type Receiver } from '../helpers/receiver.ts';
import { expectAccessible, launchBrowser, newContext, screenshot, signedInPage, signIn } from '../helpers/browser.ts';
import { BASELINE } from '../../src/dashboard/webhook-form.ts';

const cfgBody = (image: string) => ({
  components: [
    { name: 'api', values: { image, replicas: 2 } },
    { name: 'db', values: { size: 's' } },
  ],
});
const hmac = (secret: string, raw: Buffer) => createHmac('sha256', secret).update(raw).digest('hex');

/** One Chromium for the whole file (both describes use it), closed at the end. */
let sharedBrowser: Promise<Browser> | undefined;
const browserOnce = () => (sharedBrowser ??= launchBrowser());
afterAll(async () => {
  await (await sharedBrowser)?.close();
});

describe('dashboard in a browser', () => {
  let svc: TestService;
  let rx: Receiver;
  let org: OrgCreds;
  let api: ApiClient;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let dash: string;

  /** An app with configs v1 and v2 and an install provisioned on `on`. */
  async function makeInstall(name: string, labels: Record<string, string> = {}, on: 'v1' | 'v2' = 'v1') {
    const app = (await api.post('/v1/apps', { name: `app-${name}` })).body;
    const v1 = (await api.post(`/v1/apps/${app.app_id}/configs`, cfgBody('api:1'))).body;
    const v2 = (await api.post(`/v1/apps/${app.app_id}/configs`, cfgBody('api:2'))).body;
    const inst = (
      await api.post('/v1/installs', { app_id: app.app_id, name, labels, app_config_id: (on === 'v1' ? v1 : v2).app_config_id })
    ).body;
    await waitFor(
      async () => (await api.get(`/v1/installs/${inst.install_id}/app-config-versions`)).body?.[0]?.status === 'succeeded',
      15_000,
      'provisioned',
    );
    return { app, v1, v2, install: inst };
  }

  const workflowDone = (id: string) =>
    waitFor(
      async () => {
        const w = (await api.get(`/v1/workflows/${id}`)).body;
        return ['succeeded', 'failed', 'cancelled'].includes(w?.status) ? w : undefined;
      },
      20_000,
      `workflow ${id} to finish`,
    );

  beforeAll(async () => {
    [svc, rx, browser] = await Promise.all([startService(), startReceiver(), browserOnce()]);
    org = svc.createOrg('dash-org');
    api = svc.api(org);
    dash = `${svc.url}/dashboard`;
    ({ context, page } = await signedInPage(browser, dash, org));
  }, 60_000);

  afterAll(async () => {
    await context?.close();
    await rx?.close();
    await svc?.stop();
  });

  it('sends a signed-out visitor to the login form and back to the page asked for', async () => {
    const ctx2 = await newContext(browser, { width: 390, height: 844 });
    const p = await ctx2.newPage();
    await p.goto(`${dash}/${org.org_id}/webhooks`);
    expect(new URL(p.url()).pathname).toBe('/dashboard/login');
    expect(new URL(p.url()).searchParams.get('next')).toBe(`/dashboard/${org.org_id}/webhooks`);
    await expect(p.locator('input[type=hidden][name=csrf]').count()).resolves.toBe(1);
    await screenshot(p, 'login-phone');
    await p.getByLabel('Org ID').fill(org.org_id);
    await p.getByLabel('API token').fill('svc_wrong');
    await p.getByRole('button', { name: 'Sign in' }).click();
    await expect(p.getByRole('alert').textContent()).resolves.toContain('Unknown org ID or API token');
    await expectAccessible(p, 'login with an error');
    await p.getByLabel('API token').fill(org.api_token);
    await Promise.all([p.waitForURL(/\/webhooks$/), p.getByRole('button', { name: 'Sign in' }).click()]);
    const cookie = (await ctx2.cookies()).find((c) => c.name === 'svc_session')!;
    expect(cookie).toMatchObject({ httpOnly: true, sameSite: 'Lax', path: '/dashboard' });
    await p.getByRole('button', { name: 'Sign out' }).click();
    await p.goto(`${dash}/${org.org_id}`);
    expect(new URL(p.url()).pathname).toBe('/dashboard/login');
    await ctx2.close();
  });

  it('creates a webhook with "Send all events" off: the stored interests are the spec baseline', async () => {
    await page.goto(`${dash}/${org.org_id}/webhooks/new`);
    await expect(page.title()).resolves.toBe('New webhook · svc');
    const url = rx.hook('baseline');
    await page.getByLabel('Webhook URL').fill(url);
    await expect(page.getByLabel('Send all events').isChecked()).resolves.toBe(true);
    await page.getByLabel('Send all events').uncheck();
    await expect(page.locator('.resources').isVisible()).resolves.toBe(true);
    await screenshot(page, 'webhook-new');
    await expectAccessible(page, 'new webhook, per resource');
    await Promise.all([page.waitForURL(/\/webhooks$/), page.getByRole('button', { name: 'Create webhook' }).click()]);
    await expect(page.locator('.flash.ok').textContent()).resolves.toContain('Webhook created');
    const list = (await api.get('/v1/orgs/current/webhooks')).body as any[];
    const w = list.find((x) => x.webhook_url === url);
    expect(w.interests).toEqual(BASELINE);
    expect(w.interests).toEqual({
      resources: {
        installs: { outcome: 'completion', approval_requests: true, approval_responses: true },
        components: { outcome: 'completion', approval_requests: true, approval_responses: true, drift_detected: true },
        sandboxes: { outcome: 'completion', approval_requests: true, approval_responses: true, drift_detected: true },
        install_configurations: { outcome: 'completion', approval_requests: true, approval_responses: true },
        stacks: { outcome: 'completion' },
      },
    });
    expect(w.match).toBeNull();
    expect(w.has_secret).toBe(false);
  });

  it('edits a scoped webhook: its match survives the save', async () => {
    const match = { installs: { ids: ['inst_b', 'inst_a'] }, components: { selector: { match_labels: { tier: 'web' } } } };
    const created = await api.post('/v1/orgs/current/webhooks', {
      webhook_url: rx.hook('scoped'),
      interests: { resources: { installs: { ops: ['provision'] } } },
      match,
    });
    expect(created.status).toBe(201);
    const id = created.body.webhook_id;
    await page.goto(`${dash}/${org.org_id}/webhooks/${id}`);
    await expect(page.title()).resolves.toBe(`Webhook ${rx.hook('scoped')} · svc`);
    expect(JSON.parse(await page.getByLabel('Scope (match, JSON)').inputValue())).toEqual(created.body.match);
    await expect(page.getByLabel('Send all events').isChecked()).resolves.toBe(false);
    await page.locator('#res_installs_outcome').selectOption('failures');
    await screenshot(page, 'webhook-edit');
    await Promise.all([page.waitForURL(/\/webhooks$/), page.getByRole('button', { name: 'Save webhook' }).click()]);
    const after = (await api.get(`/v1/orgs/current/webhooks/${id}`)).body;
    expect(after.match).toEqual({ installs: { ids: ['inst_a', 'inst_b'] }, components: { selector: { match_labels: { tier: 'web' } } } });
    expect(after.interests).toEqual({ resources: { installs: { ops: ['provision'], outcome: 'failures' } } });
    expect(after.has_secret).toBe(false);

    // invalid match JSON is shown back with the error, nothing saved
    await page.goto(`${dash}/${org.org_id}/webhooks/${id}`);
    await page.getByLabel('Scope (match, JSON)').fill('{"installs": {"ids": []}}');
    await page.getByRole('button', { name: 'Save webhook' }).click();
    await expect(page.getByRole('alert').first().textContent()).resolves.toContain('match.installs.ids');
    await expectAccessible(page, 'webhook edit with errors');
    expect((await api.get(`/v1/orgs/current/webhooks/${id}`)).body.match).toEqual(after.match);
  });

  it('rotates a secret: the test event is signed with the new one and its result shows on the page; removing it stops signing', async () => {
    const created = await api.post('/v1/orgs/current/webhooks', { webhook_url: rx.hook('rotate'), secret: 'old-secret' });
    const id = created.body.webhook_id;
    const webhookPage = `${dash}/${org.org_id}/webhooks/${id}`;
    await page.goto(webhookPage);
    await page.getByLabel('Rotate to a new secret').check();
    await page.getByLabel('New secret', { exact: true }).fill('new-secret');
    await Promise.all([page.waitForURL(/\/webhooks$/), page.getByRole('button', { name: 'Save webhook' }).click()]);
    // no overlap chosen: a hard cut
    expect((await api.get(`/v1/orgs/current/webhooks/${id}`)).body.previous_secret_expires_at).toBeNull();

    await page.goto(webhookPage);
    await Promise.all([
      page.waitForURL((u) => u.pathname.endsWith(`/webhooks/${id}`)),
      page.getByRole('button', { name: 'Send test event' }).click(),
    ]);
    const ok = page.locator('.flash.ok');
    await expect(ok.textContent()).resolves.toMatch(/Test event delivered .*HTTP 200/);
    await expect(ok.locator('dt').allTextContents()).resolves.toEqual(['Delivered', 'HTTP status', 'Error', 'Duration']);
    const okValues = await ok.locator('dd').allTextContents();
    expect(okValues.slice(0, 3)).toEqual(['yes', '200', '—']);
    expect(okValues[3]).toMatch(/^\d+ ms$/);
    await screenshot(page, 'webhook-after-ping');
    await expectAccessible(page, 'webhook after a ping');
    const got = rx.at('rotate');
    expect(got).toHaveLength(1);
    expect(got[0].json.type).toBe('com.svc.webhook.ping.v1');
    expect(got[0].headers['x-svc-signature']).toBe(hmac('new-secret', got[0].raw));

    await page.goto(webhookPage);
    await page.getByLabel('Remove the secret').check();
    await page.getByRole('button', { name: 'Save webhook' }).click();
    await page.goto(webhookPage);
    await page.getByRole('button', { name: 'Send test event' }).click();
    await waitFor(() => rx.at('rotate').length === 2, 5000, 'second ping');
    expect(rx.at('rotate')[1].headers['x-svc-signature']).toBeUndefined();
    expect((await api.get(`/v1/orgs/current/webhooks/${id}`)).body.has_secret).toBe(false);

    // a failing receiver shows the failure: not delivered, its status, on the page it was sent from
    rx.set('rotate', { status: 500 });
    await page.goto(webhookPage);
    await Promise.all([
      page.waitForURL((u) => u.pathname.endsWith(`/webhooks/${id}`)),
      page.getByRole('button', { name: 'Send test event' }).click(),
    ]);
    const bad = page.locator('.flash.error');
    await expect(bad.textContent()).resolves.toContain('was not delivered');
    await expect(bad.locator('dd').allTextContents()).resolves.toEqual(expect.arrayContaining(['no', '500']));

    // from the list, the result shows on the list
    await page.goto(`${dash}/${org.org_id}/webhooks`);
    await Promise.all([
      page.waitForURL(/\/webhooks$/),
      page.getByRole('button', { name: `Send test event to ${rx.hook('rotate')}` }).click(),
    ]);
    await expect(page.locator('.flash.error dd').allTextContents()).resolves.toEqual(expect.arrayContaining(['no', '500']));

    await page.goto(webhookPage);
    await Promise.all([page.waitForURL(/\/webhooks$/), page.getByRole('button', { name: 'Delete webhook' }).click()]);
    expect((await api.get(`/v1/orgs/current/webhooks/${id}`)).status).toBe(404);
  });

  it('a test event to a target that does not answer shows the error', async () => {
    const created = await api.post('/v1/orgs/current/webhooks', { webhook_url: 'http://127.0.0.1:9/closed', secret: 's' });
    await page.goto(`${dash}/${org.org_id}/webhooks/${created.body.webhook_id}`);
    await page.getByRole('button', { name: 'Send test event' }).click();
    const bad = page.locator('.flash.error');
    await expect(bad.textContent()).resolves.toContain('was not delivered');
    const [delivered, status, error] = await bad.locator('dd').allTextContents();
    expect([delivered, status]).toEqual(['no', 'no response']);
    expect(error).not.toBe('—');
    await api.del(`/v1/orgs/current/webhooks/${created.body.webhook_id}`);
  });

  it('rotates a secret with an overlap: previous_secret_expires_at is set and shown, and a later hard cut clears it', async () => {
    const created = await api.post('/v1/orgs/current/webhooks', { webhook_url: rx.hook('overlap'), secret: 'first-secret' });
    const id = created.body.webhook_id;
    const webhookPage = `${dash}/${org.org_id}/webhooks/${id}`;
    await page.goto(webhookPage);
    await expect(page.locator('#previous-secret').count()).resolves.toBe(0);
    const overlap = page.getByLabel('With a rotation, the old secret keeps signing for');
    await expect(overlap.locator('option').allTextContents()).resolves.toEqual(['No overlap (hard cut)', '1 hour', '1 day', '7 days']);
    await page.getByLabel('Rotate to a new secret').check();
    await page.getByLabel('New secret', { exact: true }).fill('second-secret');
    await overlap.selectOption({ label: '1 day' });
    const before = Date.now();
    await Promise.all([page.waitForURL(/\/webhooks$/), page.getByRole('button', { name: 'Save webhook' }).click()]);
    await expect(page.locator(`#webhook-${id} td[data-label=Secret]`).textContent()).resolves.toBe('yes (rotating)');

    const w = (await api.get(`/v1/orgs/current/webhooks/${id}`)).body;
    expect(w.has_secret).toBe(true);
    const expires = Date.parse(w.previous_secret_expires_at);
    expect(expires).toBeGreaterThanOrEqual(before + 86_400_000 - 1000);
    expect(expires).toBeLessThanOrEqual(Date.now() + 86_400_000 + 1000);

    await page.goto(webhookPage);
    await expect(page.locator('#previous-secret time').getAttribute('datetime')).resolves.toBe(w.previous_secret_expires_at);
    // the new secret signs
    await page.getByRole('button', { name: 'Send test event' }).click();
    await waitFor(() => rx.at('overlap').length === 1, 5000, 'ping');
    expect(rx.at('overlap')[0].headers['x-svc-signature']).toBe(hmac('second-secret', rx.at('overlap')[0].raw));

    // rotating again with the default (no overlap) ends the old secret at once
    await page.goto(webhookPage);
    await page.getByLabel('Rotate to a new secret').check();
    await page.getByLabel('New secret', { exact: true }).fill('third-secret');
    await Promise.all([page.waitForURL(/\/webhooks$/), page.getByRole('button', { name: 'Save webhook' }).click()]);
    expect((await api.get(`/v1/orgs/current/webhooks/${id}`)).body.previous_secret_expires_at).toBeNull();
    await page.goto(webhookPage);
    await expect(page.locator('#previous-secret').count()).resolves.toBe(0);
    await api.del(`/v1/orgs/current/webhooks/${id}`);
  });

  it('shows the delivery status of each webhook on the list, and all of it on its page', async () => {
    const failing = (await api.post('/v1/orgs/current/webhooks', { webhook_url: rx.hook('status-bad') })).body;
    const fresh = (await api.post('/v1/orgs/current/webhooks', { webhook_url: rx.hook('status-new') })).body;
    const db = openDb(svc.db);
    try {
      saveDeliveryStatuses(db, [
        {
          webhook_id: failing.webhook_id,
          org_id: org.org_id,
          status: {
            last_attempt_at: '2026-01-02T03:04:05.000Z',
            last_outcome: 'failure',
            last_status_code: 503,
            last_error: 'HTTP 503 Service Unavailable',
            consecutive_failures: 3,
            attempts_total: 10,
            failures_total: 4,
            failing_since: '2026-01-02T03:04:00.000Z',
            recover_since: '2026-01-02T03:03:59.000Z',
            failed_events: 3,
          },
        },
      ]);
    } finally {
      db.close();
    }
    await page.goto(`${dash}/${org.org_id}/webhooks`);
    const row = page.locator(`#webhook-${failing.webhook_id}`);
    const cell = (label: string) => row.locator(`td[data-label="${label}"]`).textContent();
    await expect(cell('Last outcome')).resolves.toBe('failure HTTP 503');
    await expect(cell('Last attempt')).resolves.toBe('2026-01-02 03:04:05Z');
    await expect(cell('Consecutive failures')).resolves.toBe('3');
    await expect(cell('Attempts / failures')).resolves.toBe('10 / 4');
    const freshRow = page.locator(`#webhook-${fresh.webhook_id}`);
    await expect(freshRow.locator('td[data-label="Last outcome"]').textContent()).resolves.toBe('none yet');
    await expect(freshRow.locator('td[data-label="Attempts / failures"]').textContent()).resolves.toBe('0 / 0');
    await screenshot(page, 'webhooks-status');
    await expectAccessible(page, 'webhooks list with delivery status');

    await page.goto(`${dash}/${org.org_id}/webhooks/${failing.webhook_id}`);
    const facts = page.locator('#delivery-status');
    const dts = await facts.locator('dt').allTextContents();
    const dds = await facts.locator('dd').allTextContents();
    expect(Object.fromEntries(dts.map((k, i) => [k, dds[i]]))).toEqual({
      'Last outcome': 'failure',
      'Last attempt': '2026-01-02 03:04:05Z',
      'Last HTTP status': '503',
      'Last error': 'HTTP 503 Service Unavailable',
      'Consecutive failures': '3',
      Attempts: '10',
      Failures: '4',
    });
    await screenshot(page, 'webhook-status');
    await expectAccessible(page, 'webhook with delivery status');
    // the API reports the same
    expect((await api.get(`/v1/orgs/current/webhooks/${failing.webhook_id}`)).body.delivery_status).toMatchObject({
      last_outcome: 'failure',
      consecutive_failures: 3,
    });
    await api.del(`/v1/orgs/current/webhooks/${failing.webhook_id}`);
    await api.del(`/v1/orgs/current/webhooks/${fresh.webhook_id}`);
  });

  it('rolls an install back through plan, then apply', async () => {
    const { app, v1, v2, install } = await makeInstall('rb-1');
    const up = await api.post(`/v1/installs/${install.install_id}/app-config-updates`, { app_config_id: v2.app_config_id });
    expect(up.status).toBe(201);
    await workflowDone(up.body.workflow_id);

    await page.goto(`${dash}/${org.org_id}/installs/${install.install_id}`);
    await expect(page.locator('h1').textContent()).resolves.toBe('rb-1');
    await expect(page.title()).resolves.toBe('rb-1 · svc');
    // names, with ids beside them
    const facts = page.locator('#h-facts + dl');
    await expect(facts.textContent()).resolves.toContain(`app-rb-1 ${app.app_id}`);
    await expect(facts.textContent()).resolves.toContain(`v2 ${v2.app_config_id}`);
    await page.locator('details summary').first().click();
    // the newest version is the update from v1 to v2
    await expect(page.locator('details summary').first().textContent()).resolves.toBe('Diff from config v1');
    await screenshot(page, 'install');
    await expectAccessible(page, 'install with versions');
    await page.getByLabel('Roll back to').selectOption(v1.app_config_id);
    await page.getByRole('button', { name: 'Plan rollback' }).click();
    await expect(page.locator('h1').textContent()).resolves.toBe('Rollback plan for rb-1');
    await expect(page.locator('#h-plan').textContent()).resolves.toBe('config v2 → config v1');
    await expect(page.locator('ul.diff').textContent()).resolves.toContain('"api:2" → "api:1"');
    await screenshot(page, 'rollback-plan');
    await expectAccessible(page, 'rollback plan');
    // plan only: nothing changed yet
    expect((await api.get(`/v1/installs/${install.install_id}`)).body.app_config_id).toBe(v2.app_config_id);

    await Promise.all([page.waitForURL(/\/workflows\/[a-z0-9_]+$/), page.getByRole('button', { name: 'Apply rollback' }).click()]);
    const wfId = new URL(page.url()).pathname.split('/').pop()!;
    const wf = await workflowDone(wfId);
    expect(wf).toMatchObject({ type: 'app_config_update', status: 'succeeded' });
    expect(wf.steps.map((s: any) => s.name)).toEqual(['deploy api']);
    await page.reload();
    await expect(page.title()).resolves.toBe('app_config_update for install rb-1 · svc');
    await expect(page.locator('h1').textContent()).resolves.toBe('app_config_update for install rb-1 succeeded');
    await expect(page.locator(`a[href$="/components/${wf.steps[0].component_id}"]`).textContent()).resolves.toBe('Component api');
    await screenshot(page, 'workflow-rollback');
    await expectAccessible(page, 'finished workflow');
    const versions = (await api.get(`/v1/installs/${install.install_id}/app-config-versions`)).body;
    expect(versions[0]).toMatchObject({
      app_config_id: v1.app_config_id,
      old_app_config_id: v2.app_config_id,
      workflow_id: wfId,
      status: 'succeeded',
    });
    expect((await api.get(`/v1/installs/${install.install_id}`)).body.app_config_id).toBe(v1.app_config_id);
  }, 60_000);

  it('approves a branch-run group plan with a note', async () => {
    const { app, v1, install } = await makeInstall('br-1', { ring: 'canary' }, 'v2');
    const branch = (
      await api.post(`/v1/apps/${app.app_id}/branches`, {
        name: 'main',
        install_groups: [{ name: 'canary', selector: { match_labels: { ring: 'canary' } } }],
      })
    ).body;
    const run = (
      await api.post(`/v1/apps/${app.app_id}/branches/${branch.app_branch_id}/runs`, { app_config_id: v1.app_config_id, skip_builds: true })
    ).body;
    const step = await waitFor(
      async () => (await api.get(`/v1/workflows/${run.workflow_id}`)).body?.steps?.find((s: any) => s.status === 'awaiting_approval'),
      15_000,
      'approval',
    );
    expect(step.name).toBe('plan install group: canary');

    await page.goto(`${dash}/${org.org_id}/workflows/${run.workflow_id}`);
    await expect(page.title()).resolves.toBe('app_branch_run for branch main of app app-br-1 · svc');
    // no auto-refresh while an approval form waits
    await expect(page.locator('meta[http-equiv=refresh]').count()).resolves.toBe(0);
    const card = page.locator(`#step-${step.step_id}`);
    await expect(card.textContent()).resolves.toContain('br-1');
    await expect(card.locator('ul.diff').textContent()).resolves.toContain('"api:2" → "api:1"');
    await screenshot(page, 'workflow-approval');
    await expectAccessible(page, 'workflow awaiting approval');
    await card.getByLabel('Note (optional)').fill('ship it');
    await card.getByRole('button', { name: 'Approve' }).click();
    await expect(page.locator('.flash.ok').textContent()).resolves.toContain('plan install group: canary: approved');
    const done = await workflowDone(run.workflow_id);
    expect(done.status).toBe('succeeded');
    expect(done.steps.find((s: any) => s.step_id === step.step_id).approval).toMatchObject({ status: 'approved', note: 'ship it' });
    expect((await api.get(`/v1/installs/${install.install_id}`)).body.app_config_id).toBe(v1.app_config_id);
    await page.goto(`${dash}/${org.org_id}/workflows/${run.workflow_id}`);
    await expect(page.locator('h1').textContent()).resolves.toContain('succeeded');
    await expect(page.getByRole('button', { name: 'Approve' }).count()).resolves.toBe(0);
    // the install's app_config_update names the step of the branch run that launched it
    const child = (await api.get(`/v1/installs/${install.install_id}/workflows`)).body.find((w: any) => w.type === 'app_config_update');
    await page.goto(`${dash}/${org.org_id}/workflows/${child.workflow_id}`);
    await expect(page.locator('dt:text-is("Launched by") + dd').textContent()).resolves.toContain(
      'app_branch_run for branch main of app app-br-1, step deploy install group: canary',
    );
  }, 60_000);

  it('lists a waiting branch-run step on the approvals page, reachable from the navigation, and approves it there', async () => {
    const { app, v1, install } = await makeInstall('br-2', { ring: 'early' }, 'v2');
    await page.goto(`${dash}/${org.org_id}`);
    await expect(page.getByRole('link', { name: 'Approvals', exact: true }).count()).resolves.toBe(1);
    const branch = (
      await api.post(`/v1/apps/${app.app_id}/branches`, {
        name: 'release',
        install_groups: [{ name: 'early', selector: { match_labels: { ring: 'early' } } }],
      })
    ).body;
    const run = (
      await api.post(`/v1/apps/${app.app_id}/branches/${branch.app_branch_id}/runs`, { app_config_id: v1.app_config_id, skip_builds: true })
    ).body;
    const step = await waitFor(
      async () => (await api.get(`/v1/workflows/${run.workflow_id}`)).body?.steps?.find((s: any) => s.status === 'awaiting_approval'),
      15_000,
      'approval',
    );

    // the navigation counts it and leads to it
    await page.goto(`${dash}/${org.org_id}`);
    const nav = page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Approvals 1 waiting' });
    await Promise.all([page.waitForURL(/\/approvals$/), nav.click()]);
    await expect(page.title()).resolves.toBe('Approvals (1) · svc');
    const card = page.locator(`#approval-${run.workflow_id}-${step.step_id}`);
    await expect(card.locator('h2').textContent()).resolves.toBe('plan install group: early');
    const wfLink = card.getByRole('link', { name: 'app_branch_run for branch release of app app-br-2' });
    await expect(wfLink.getAttribute('href')).resolves.toBe(`/dashboard/${org.org_id}/workflows/${run.workflow_id}`);
    // the plan, as the workflow page shows it: the install by name, its labels, the config change and diff
    await expect(card.textContent()).resolves.toContain('Plan for install group early: 1 install(s)');
    await expect(card.getByRole('link', { name: 'br-2', exact: true }).getAttribute('href')).resolves.toBe(
      `/dashboard/${org.org_id}/installs/${install.install_id}`,
    );
    await expect(card.locator('ul.diff').textContent()).resolves.toContain('"api:2" → "api:1"');
    await screenshot(page, 'approvals');
    await expectAccessible(page, 'approvals');

    // the branch run is reachable from there
    await Promise.all([page.waitForURL((u) => u.pathname.endsWith(run.workflow_id)), wfLink.click()]);
    await expect(page.locator('h1').textContent()).resolves.toContain('app_branch_run for branch release of app app-br-2');
    await page.goBack();

    await card.getByLabel('Note (optional)').fill('early ring go');
    await Promise.all([page.waitForURL(/\/approvals$/), card.getByRole('button', { name: 'Approve' }).click()]);
    await expect(page.locator('.flash.ok').textContent()).resolves.toContain('plan install group: early: approved');
    await expect(page.locator('main').textContent()).resolves.toContain('Nothing is waiting for approval.');
    await expect(page.getByRole('link', { name: 'Approvals', exact: true }).count()).resolves.toBe(1);
    const done = await workflowDone(run.workflow_id);
    expect(done.status).toBe('succeeded');
    expect(done.steps.find((s: any) => s.step_id === step.step_id).approval).toMatchObject({ status: 'approved', note: 'early ring go' });
    expect((await api.get(`/v1/installs/${install.install_id}`)).body.app_config_id).toBe(v1.app_config_id);
  }, 60_000);

  it('rejects from the approvals page: the run fails and the rest is cancelled', async () => {
    const { app, v1, install } = await makeInstall('br-3', { ring: 'late' }, 'v2');
    const branch = (
      await api.post(`/v1/apps/${app.app_id}/branches`, {
        name: 'hotfix',
        install_groups: [{ name: 'late', install_ids: [install.install_id] }],
      })
    ).body;
    const run = (
      await api.post(`/v1/apps/${app.app_id}/branches/${branch.app_branch_id}/runs`, { app_config_id: v1.app_config_id, skip_builds: true })
    ).body;
    const step = await waitFor(
      async () => (await api.get(`/v1/workflows/${run.workflow_id}`)).body?.steps?.find((s: any) => s.status === 'awaiting_approval'),
      15_000,
      'approval',
    );
    await page.goto(`${dash}/${org.org_id}/approvals`);
    const card = page.locator(`#approval-${run.workflow_id}-${step.step_id}`);
    await card.getByLabel('Note (optional)').fill('not now');
    await Promise.all([page.waitForURL(/\/approvals$/), card.getByRole('button', { name: 'Reject' }).click()]);
    await expect(page.locator('.flash.ok').textContent()).resolves.toContain('plan install group: late: rejected');
    const done = await workflowDone(run.workflow_id);
    expect(done.status).toBe('failed');
    expect(done.steps.map((s: any) => s.status)).toEqual(['succeeded', 'failed', 'cancelled']);
    expect((await api.get(`/v1/installs/${install.install_id}`)).body.app_config_id).toBe(install.app_config_id);
  }, 60_000);

  it('follows every link of delivered events to a page that loads', async () => {
    const { install } = await makeInstall('links-1');
    await api.post('/v1/orgs/current/webhooks', { webhook_url: rx.hook('links') });
    const wf = (await api.post(`/v1/installs/${install.install_id}/reprovision`)).body;
    await workflowDone(wf.workflow_id);
    const events = await waitFor(
      () => {
        const got = rx.at('links').map((r) => r.json);
        return got.some((e) => e.subject.endsWith(`/workflow/${wf.workflow_id}/succeeded`)) ? got : undefined;
      },
      10_000,
      'events',
    );
    const links = new Set<string>();
    for (const e of events) for (const u of Object.values(e.data.links) as string[]) links.add(u);
    const kinds = new Set(events.flatMap((e) => Object.keys(e.data.links)));
    expect([...kinds].sort()).toEqual(['component', 'install', 'org', 'sandbox', 'workflow']);
    for (const u of links) {
      expect(u.startsWith(`${svc.url}/dashboard/`)).toBe(true);
      const res = await page.goto(u);
      expect(res?.status(), u).toBe(200);
      expect(new URL(page.url()).pathname).toBe(new URL(u).pathname);
    }
    await page.goto(events.find((e) => e.data.links.component).data.links.component);
    await expect(page.title()).resolves.toMatch(/^(api|db) · links-1 · svc$/);
    await expect(page.locator('h1').textContent()).resolves.toMatch(/^Component (api|db) of links-1$/);
    await screenshot(page, 'component');
    await expectAccessible(page, 'component');
    await page.goto(events.find((e) => e.data.links.sandbox).data.links.sandbox);
    await expect(page.locator('h1').textContent()).resolves.toBe('Sandbox of links-1');
    await screenshot(page, 'sandbox');
    await expectAccessible(page, 'sandbox');
    await page.goto(`${dash}/${org.org_id}`);
    await expect(page.title()).resolves.toBe('dash-org · svc');
    await screenshot(page, 'overview');
    await expectAccessible(page, 'org overview');
    await page.goto(`${dash}/${org.org_id}/installs`);
    const row = page.locator('tr', { has: page.getByRole('link', { name: 'links-1', exact: true }) });
    await expect(row.locator('td[data-label=App]').textContent()).resolves.toBe('app-links-1');
    await screenshot(page, 'installs');
    await expectAccessible(page, 'installs');
    await page.setViewportSize({ width: 390, height: 844 });
    await page.goto(`${dash}/${org.org_id}/webhooks`);
    await screenshot(page, 'webhooks-phone');
    await expectAccessible(page, 'webhooks (phone)');
    await page.goto(`${dash}/${org.org_id}/workflows/${wf.workflow_id}`);
    await expect(page.title()).resolves.toBe('reprovision for install links-1 · svc');
    await screenshot(page, 'workflow-phone');
    await page.setViewportSize({ width: 1100, height: 900 });
  }, 60_000);

  it('creates an API token shown once, which works until revoked', async () => {
    await page.goto(`${dash}/${org.org_id}/settings`);
    await page.getByLabel('Name (optional)').fill('from-dashboard');
    await page.getByRole('button', { name: 'Create token' }).click();
    const token = await page.getByRole('textbox', { name: 'API token', exact: true }).inputValue();
    expect(token).toMatch(/^svc_/);
    await screenshot(page, 'settings');
    await expectAccessible(page, 'settings with a new token');
    const viaToken = svc.api({ org_id: org.org_id, api_token: token });
    expect((await viaToken.get('/v1/installs')).status).toBe(200);
    await page.goto(`${dash}/${org.org_id}/settings`);
    await expect(page.content()).resolves.not.toContain(token);
    await page.getByRole('button', { name: 'Revoke token from-dashboard' }).click();
    await expect(page.locator('.flash.ok').textContent()).resolves.toContain('revoked');
    expect((await viaToken.get('/v1/installs')).status).toBe(401);
  });

  it('refuses a POST without the CSRF token (403) and changes nothing', async () => {
    const created = await api.post('/v1/orgs/current/webhooks', { webhook_url: rx.hook('csrf') });
    const id = created.body.webhook_id;
    const res = await context.request.post(`${dash}/${org.org_id}/webhooks/${id}/delete`, { form: {}, maxRedirects: 0 });
    expect(res.status()).toBe(403);
    const wrong = await context.request.post(`${dash}/${org.org_id}/webhooks/${id}/delete`, { form: { csrf: 'nope' }, maxRedirects: 0 });
    expect(wrong.status()).toBe(403);
    expect((await api.get(`/v1/orgs/current/webhooks/${id}`)).status).toBe(200);
  });
});

describe('dashboard over HTTP', () => {
  let svc: TestService;
  let org: OrgCreds;
  let other: OrgCreds;
  let dash: string;

  const get = (p: string, cookie?: string) => fetch(dash + p, { redirect: 'manual', headers: cookie ? { cookie } : {} });
  const post = (p: string, form: Record<string, string>, cookie?: string) =>
    fetch(dash + p, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded', ...(cookie ? { cookie } : {}) },
      body: new URLSearchParams(form),
    });
  const cookieOf = (res: Response, name: string) =>
    res.headers
      .getSetCookie()
      .find((c) => c.startsWith(`${name}=`))
      ?.split(';')[0];
  const csrfIn = (html: string) => /name="csrf" value="([^"]+)"/.exec(html)?.[1];

  async function login(creds: OrgCreds, next?: string) {
    const form = await get('/login');
    const loginCookie = cookieOf(form, 'svc_login_csrf')!;
    const res = await post(
      '/login',
      { csrf: csrfIn(await form.text())!, org_id: creds.org_id, api_token: creds.api_token, ...(next ? { next } : {}) },
      loginCookie,
    );
    return { res, session: cookieOf(res, 'svc_session') };
  }

  beforeAll(async () => {
    svc = await startService({ localRunner: false }); // jobs wait: workflows stay running
    org = svc.createOrg('http-a');
    other = svc.createOrg('http-b');
    dash = `${svc.url}/dashboard`;
  });
  afterAll(async () => svc?.stop());

  it('revoking the API token a session signed in with ends that session', async () => {
    const db = openDb(svc.db);
    const extra = { org_id: org.org_id, api_token: createToken(db, org.org_id, 'short-lived').api_token };
    const { session } = await login(extra);
    expect((await get(`/${org.org_id}`, session)).status).toBe(200);
    const tokenId = lookupToken(db, extra.api_token)!.token_id;
    expect(revokeToken(db, org.org_id, tokenId)).toBe(true);
    db.close();
    const after = await get(`/${org.org_id}`, session);
    expect(after.status).toBe(302);
    expect(after.headers.get('location')).toMatch(/\/dashboard\/login/);
  });

  it('the login form has org_id, api_token and a hidden csrf', async () => {
    const res = await get('/login');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/html/);
    const html = await res.text();
    expect(html).toMatch(/<input[^>]*name="org_id"/);
    expect(html).toMatch(/<input[^>]*type="password"[^>]*name="api_token"/);
    expect(html).toMatch(/<input type="hidden" name="csrf" value="[^"]+"/);
    expect(res.headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
  });

  it('signs in: HttpOnly SameSite=Lax session cookie, redirect to the org page or a local next', async () => {
    const { res, session } = await login(org);
    expect(res.status).toBe(303);
    expect(res.headers.get('location')).toBe(`/dashboard/${org.org_id}`);
    const set = res.headers.getSetCookie().find((c) => c.startsWith('svc_session='))!;
    expect(set).toMatch(/HttpOnly/);
    expect(set).toMatch(/SameSite=Lax/);
    expect(set).toMatch(/Path=\/dashboard/);
    expect((await get(`/${org.org_id}`, session)).status).toBe(200);

    expect((await login(org, `/dashboard/${org.org_id}/settings?x=1`)).res.headers.get('location')).toBe(
      `/dashboard/${org.org_id}/settings?x=1`,
    );
    for (const bad of ['https://evil.example/', '//evil.example/x', '/\\evil.example', '/v1/installs', 'javascript:alert(1)']) {
      expect((await login(org, bad)).res.headers.get('location'), bad).toBe(`/dashboard/${org.org_id}`);
    }
  });

  it('refuses a wrong token (401) and a login POST without its CSRF token (403)', async () => {
    const form = await get('/login');
    const loginCookie = cookieOf(form, 'svc_login_csrf')!;
    const csrf = csrfIn(await form.text())!;
    const wrong = await post('/login', { csrf, org_id: org.org_id, api_token: other.api_token }, loginCookie);
    expect(wrong.status).toBe(401);
    expect(cookieOf(wrong, 'svc_session')).toBeUndefined();
    expect((await post('/login', { org_id: org.org_id, api_token: org.api_token }, loginCookie)).status).toBe(403);
    expect((await post('/login', { csrf, org_id: org.org_id, api_token: org.api_token })).status).toBe(403);
  });

  it('every page but login redirects to login with next when signed out', async () => {
    for (const p of [
      `/${org.org_id}`,
      `/${org.org_id}/installs`,
      `/${org.org_id}/webhooks`,
      `/${org.org_id}/settings`,
      `/${org.org_id}/workflows/wf_x`,
      `/${org.org_id}/installs/i/sandbox`,
      `/${org.org_id}/anything`,
    ]) {
      const res = await get(p);
      expect(res.status, p).toBe(302);
      expect(res.headers.get('location'), p).toBe(`/dashboard/login?next=${encodeURIComponent(`/dashboard${p}`)}`);
    }
    const bogus = await get(`/${org.org_id}`, 'svc_session=not-a-session');
    expect(bogus.status).toBe(302);
    const postOut = await post(`/${org.org_id}/settings/tokens`, {});
    expect(postOut.status).toBe(303);
    expect(postOut.headers.get('location')).toBe('/dashboard/login');
  });

  it("another org's pages and entities are 404, unknown pages 404 as HTML, the API keeps its JSON 404", async () => {
    const { session } = await login(org);
    const b = svc.api(other);
    const wh = (await b.post('/v1/orgs/current/webhooks', { webhook_url: 'http://127.0.0.1:9/x' })).body;
    for (const p of [
      `/${other.org_id}`,
      `/${other.org_id}/webhooks`,
      `/${org.org_id}/webhooks/${wh.webhook_id}`,
      `/${org.org_id}/installs/inst_nope`,
      `/${org.org_id}/workflows/wf_nope`,
      `/${org.org_id}/nope`,
      '/nope/deeper/still',
    ]) {
      const res = await get(p, session);
      expect(res.status, p).toBe(404);
      expect(res.headers.get('content-type'), p).toMatch(/^text\/html/);
    }
    const api404 = await fetch(`${svc.url}/v1/nope`);
    expect(api404.headers.get('content-type')).toMatch(/json/);
    const outside = await fetch(`${svc.url}/dashboardx`);
    expect(outside.status).toBe(404);
    expect(await outside.json()).toMatchObject({ error: 'not_found' });
    // the other org's webhook is untouched by a POST from this org's session
    const page = await (await get(`/${org.org_id}/webhooks`, session)).text();
    const del = await post(`/${org.org_id}/webhooks/${wh.webhook_id}/delete`, { csrf: csrfIn(page)! }, session);
    expect(del.status).toBe(404);
    expect((await b.get(`/v1/orgs/current/webhooks/${wh.webhook_id}`)).status).toBe(200);
  });

  it('checks the per-session CSRF token on every POST', async () => {
    const { session } = await login(org);
    const { session: session2 } = await login(org);
    const html = await (await get(`/${org.org_id}/settings`, session)).text();
    const csrf = csrfIn(html)!;
    expect((await post(`/${org.org_id}/settings/tokens`, { name: 'x' }, session)).status).toBe(403);
    expect((await post(`/${org.org_id}/settings/tokens`, { name: 'x', csrf }, session2)).status).toBe(403);
    expect((await post('/logout', {}, session)).status).toBe(403);
    const ok = await post(`/${org.org_id}/settings/tokens`, { name: 'x', csrf }, session);
    expect(ok.status).toBe(200);
    expect(await ok.text()).toContain('shown only once');
    const out = await post('/logout', { csrf }, session);
    expect(out.status).toBe(303);
    expect((await get(`/${org.org_id}`, session)).status).toBe(302);
    expect((await get(`/${org.org_id}`, session2)).status).toBe(200);
  });

  it('a running workflow page refreshes itself, has no axe violations, and can be cancelled', async () => {
    const { session } = await login(org);
    const api = svc.api(org);
    const app = (await api.post('/v1/apps', { name: 'running' })).body;
    await api.post(`/v1/apps/${app.app_id}/configs`, cfgBody('api:1'));
    const inst = (await api.post('/v1/installs', { app_id: app.app_id, name: 'waits' })).body;
    const wfId = (await api.get(`/v1/installs/${inst.install_id}/workflows`)).body[0].workflow_id;
    const html = await (await get(`/${org.org_id}/workflows/${wfId}`, session)).text();
    expect(html).toContain('data-refresh-seconds="3"');
    expect(html).toContain('<script src="/dashboard/app.js" defer=""></script>');
    expect(html).toContain('Cancel workflow');
    expect(html).toContain('<title>provision for install waits · svc</title>');
    const bctx = await newContext(await browserOnce());
    await bctx.clock.install(); // the pages' timers move when the test says (the refresh every 3 s)
    try {
      const p = await bctx.newPage();
      await signIn(p, dash, org, `/dashboard/${org.org_id}/workflows/${wfId}`);
      await expect(p.locator('h1').textContent()).resolves.toBe('provision for install waits started');
      // it reloads itself until the reader switches that off
      const toggle = p.getByLabel('Refresh this page every 3 s');
      await expect(toggle.isChecked()).resolves.toBe(true);
      const reloaded = p.waitForEvent('load', { timeout: 10_000 });
      await p.clock.runFor(3000);
      await reloaded;
      await p.getByLabel('Refresh this page every 3 s').uncheck();
      await screenshot(p, 'workflow-running');
      await expectAccessible(p, 'running workflow');
      await p.reload();
      await expect(p.getByLabel('Refresh this page every 3 s').isChecked()).resolves.toBe(false);
    } finally {
      await bctx.close();
    }
    const res = await post(`/${org.org_id}/workflows/${wfId}/cancel`, { csrf: csrfIn(html)! }, session);
    expect(res.status).toBe(303);
    expect(res.headers.get('location')).toBe(`/dashboard/${org.org_id}/workflows/${wfId}`);
    expect((await api.get(`/v1/workflows/${wfId}`)).body.status).toBe('cancelled');
    const after = await (
      await get(`/${org.org_id}/workflows/${wfId}`, cookieOf(res, 'svc_flash') ? `${session}; ${cookieOf(res, 'svc_flash')}` : session)
    ).text();
    expect(after).not.toContain('data-refresh-seconds');
    expect(after).not.toContain('app.js');
    expect(after).toContain('Workflow cancelled.');
  });

  it('/ redirects to the dashboard', async () => {
    for (const method of ['GET', 'HEAD']) {
      const res = await fetch(`${svc.url}/`, { method, redirect: 'manual' });
      expect(res.status, method).toBe(302);
      expect(res.headers.get('location'), method).toBe('/dashboard');
    }
    // and on from there: to sign-in, or the org page when signed in
    expect((await get('')).headers.get('location')).toBe('/dashboard/login');
    const { session } = await login(org);
    expect((await get('', session)).headers.get('location')).toBe(`/dashboard/${org.org_id}`);
    // the API and other paths are not redirected
    expect((await fetch(`${svc.url}/healthz`)).status).toBe(200);
    expect((await fetch(`${svc.url}/`, { method: 'POST', redirect: 'manual' })).status).toBe(404);
  });

  it('a dashboard at the root of the server serves / itself', async () => {
    const s3 = await startService({ dashboardUrl: 'https://ops.example.com/', localRunner: false });
    try {
      const res = await fetch(`${s3.url}/`, { redirect: 'manual' });
      expect(res.status).toBe(302);
      expect(res.headers.get('location')).toBe('/login');
      expect((await fetch(`${s3.url}/login`)).status).toBe(200);
    } finally {
      await s3.stop();
    }
  });

  it('is mounted under the path of --dashboard-url', async () => {
    const s2 = await startService({ dashboardUrl: 'https://ops.example.com/ops/dash' });
    try {
      const o = s2.createOrg('custom');
      // / goes to the path the dashboard is served under here, not to the dashboard URL's host
      const root = await fetch(`${s2.url}/`, { redirect: 'manual' });
      expect(root.status).toBe(302);
      expect(root.headers.get('location')).toBe('/ops/dash');
      expect((await fetch(`${s2.url}/ops/dash/login`)).status).toBe(200);
      const r = await fetch(`${s2.url}/ops/dash/${o.org_id}`, { redirect: 'manual' });
      expect(r.headers.get('location')).toBe(`/ops/dash/login?next=${encodeURIComponent(`/ops/dash/${o.org_id}`)}`);
      const login = await fetch(`${s2.url}/ops/dash/login`);
      // over https the login CSRF cookie is a __Host- cookie (for the path /: no sibling subdomain can set it)
      expect(login.headers.getSetCookie()[0]).toMatch(
        /^__Host-svc_login_csrf=[^;]+; Max-Age=3600; Path=\/; HttpOnly; Secure; SameSite=Lax/,
      );
      const old = await fetch(`${s2.url}/dashboard/login`);
      expect(old.status).toBe(404);
      expect(await old.json()).toMatchObject({ error: 'not_found' });
    } finally {
      await s2.stop();
    }
  });
});
