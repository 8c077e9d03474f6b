// The dashboard and ordering (CONTRACT 10.1, issue 53), in headless Chromium: an event's page shows
// its ordering key and sequence with links to the previous and next event of the key (they lead
// there); the webhook form offers ordering per key, which the API then returns, and shows it again
// when the webhook is edited. Both pages are axe-clean.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { startService, type ApiClient, type OrgCreds, type TestService } from '../helpers/service.ts';
import { expectAccessible, launchBrowser, screenshot, signedInPage } from '../helpers/browser.ts';
import { get, post, waitWf } from '../helpers/workflows.ts';

type Json = any;

describe('dashboard: ordering keys and ordered webhooks', () => {
  let svc: TestService;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let org: OrgCreds;
  let api: ApiClient;
  let dash: string;

  beforeAll(async () => {
    [svc, browser] = await Promise.all([startService(), launchBrowser()]);
    org = svc.createOrg('ordering-dash');
    api = svc.api(org);
    dash = `${svc.url}/dashboard`;
    ({ context, page } = await signedInPage(browser, dash, org));
  }, 60_000);

  afterAll(async () => {
    await context?.close();
    await browser?.close();
    await svc?.stop();
  });

  it("an event's page shows its key and sequence, and leads to the previous and next of the key", async () => {
    const app = await post(api, '/v1/apps', { name: 'shop' });
    await post(api, `/v1/apps/${app.app_id}/configs`, { components: [{ name: 'api' }] });
    const inst = await post(api, '/v1/installs', { app_id: app.app_id, name: 'eu-1' });
    for (const w of await get(api, `/v1/installs/${inst.install_id}/workflows`)) await waitWf(api, w.workflow_id);
    const ofKey = (await get(api, `/v1/events?order_key=${inst.install_id}`)).data as Json[];
    expect(ofKey.length).toBeGreaterThan(3);
    await page.goto(`${dash}/${org.org_id}/events/${ofKey[1].id}`);
    await expect(page.locator('#event-order-key').textContent()).resolves.toBe(inst.install_id);
    await expect(page.locator('#event-sequence').textContent()).resolves.toMatch(/^2 /);
    await expectAccessible(page, 'the event page with its key');
    await screenshot(page, 'event-ordering-key');
    await Promise.all([page.waitForURL(new RegExp(`/events/${ofKey[0].id}$`)), page.locator('#event-previous').click()]);
    await expect(page.locator('#event-sequence').textContent()).resolves.toMatch(/^1 /);
    expect(await page.locator('#event-previous').count()).toBe(0); // nothing before 1
    await Promise.all([page.waitForURL(new RegExp(`/events/${ofKey[1].id}$`)), page.locator('#event-next').click()]);
    await Promise.all([page.waitForURL(new RegExp(`/events/${ofKey[2].id}$`)), page.locator('#event-next').click()]);
    await expect(page.locator('#event-sequence').textContent()).resolves.toMatch(/^3 /);
  });

  it('the webhook form offers ordering per key; the webhook is saved with it and shows it when edited', async () => {
    await page.goto(`${dash}/${org.org_id}/webhooks/new`);
    await page.getByLabel('Webhook URL').fill('http://127.0.0.1:9/ordered');
    await page.getByLabel('Ordering').selectOption('per_key');
    await expectAccessible(page, 'the webhook form with ordering');
    await Promise.all([page.waitForURL(/\/webhooks$/), page.getByRole('button', { name: 'Create webhook' }).click()]);
    const hooks = (await get(api, '/v1/orgs/current/webhooks')) as Json[];
    const hook = hooks.find((h) => h.webhook_url === 'http://127.0.0.1:9/ordered');
    expect(hook.delivery).toEqual({ ordering: 'per_key' });
    await page.goto(`${dash}/${org.org_id}/webhooks/${hook.webhook_id}`);
    expect(await page.getByLabel('Ordering').inputValue()).toBe('per_key');
    await page.getByLabel('Ordering').selectOption('none');
    await Promise.all([page.waitForURL(/\/webhooks/), page.getByRole('button', { name: 'Save webhook' }).click()]);
    expect((await get(api, `/v1/orgs/current/webhooks/${hook.webhook_id}`)).delivery).toBeNull();
  });
});
