// The dashboard's event catalog (CONTRACT 10.3), in headless Chromium: reached from the navigation,
// it lists every type svc sends with its subject pattern, and a section per type with its description,
// its schema URL (served, its `$id` that URL), an example of the signed-in org (the catalog's,
// validating against that schema with ajv) and the JSON Schema itself. axe-clean; screenshot in
// test/artifacts/event-types.png. Signed out, the page sends to the login.
import { Ajv2020 } from 'ajv/dist/2020.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { startService, waitFor, type OrgCreds, type TestService } from '../helpers/service.ts';
import { startReceiver, type Receiver } from '../helpers/receiver.ts';
import { expectAccessible, launchBrowser, screenshot, signedInPage } from '../helpers/browser.ts';
import { EVENT_TYPES } from '../../src/events/catalog.ts';

const TYPES = [...EVENT_TYPES.keys()];

describe('dashboard: event types', () => {
  let svc: TestService;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let org: OrgCreds;
  let dash: string;

  beforeAll(async () => {
    [svc, browser] = await Promise.all([startService(), launchBrowser()]);
    org = svc.createOrg('catalog-dash');
    dash = `${svc.url}/dashboard`;
    ({ context, page } = await signedInPage(browser, dash, org));
  }, 60_000);

  afterAll(async () => {
    await context?.close();
    await browser?.close();
    await svc?.stop();
  });

  it('from the navigation: every type with its pattern and description, then its schema URL, example and schema', async () => {
    await page.goto(`${dash}/${org.org_id}`);
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Event types' }).click();
    await page.waitForURL(`${dash}/${org.org_id}/event-types`);
    expect(await page.getByRole('link', { name: 'Event types' }).getAttribute('aria-current')).toBe('page');
    expect(await page.locator('h1').innerText()).toBe('Event types');
    const rows = page.locator('#event-types tbody tr');
    expect(await rows.count()).toBe(TYPES.length);
    expect(await rows.locator('td[data-label="Type"]').allInnerTexts()).toEqual(TYPES);
    expect(await rows.nth(0).locator('td[data-label="Subject"]').innerText()).toBe('<org>/workflow/<workflow>/<transition>');

    const ajv = new Ajv2020({ strict: true });
    for (const type of TYPES) {
      const section = page.locator(`section#${type.replace(/[^a-z0-9]+/gi, '-')}`);
      expect(await section.locator('h2').innerText()).toBe(type);
      // the description, its `names` as code
      const description = EVENT_TYPES.get(type)!.description;
      expect(await section.locator('p.event-type-description').innerText()).toBe(description.replaceAll('`', ''));
      const quoted = [...description.matchAll(/`([^`]+)`/g)].map((m) => m[1]);
      expect(await section.locator('p.event-type-description code').allInnerTexts()).toEqual(quoted);
      const schemaUrl = await section.locator('dd a').getAttribute('href');
      expect(schemaUrl).toBe(`${svc.url}/v1/event-types/${type}/schema`);
      const served = await (await fetch(schemaUrl!)).json();
      expect(served.$id).toBe(schemaUrl);
      // the page's schema is the served one; its example is of this org and validates against it
      const shown = JSON.parse((await section.getByLabel(`JSON Schema of ${type}`).textContent()) ?? '');
      expect(shown).toEqual(served);
      const example = JSON.parse((await section.getByLabel(`Example of ${type}`).textContent()) ?? '');
      expect(example).toMatchObject({ type, dataschema: schemaUrl, svcorgid: org.org_id });
      expect(ajv.compile(served)(example), type).toBe(true);
    }
    // the first example is open, the schemas folded
    await expect.poll(() => page.getByLabel(`Example of ${TYPES[0]}`).isVisible()).toBe(true);
    expect(await page.getByLabel(`JSON Schema of ${TYPES[0]}`).isVisible()).toBe(false);
    await page.locator(`section#${TYPES[3].replace(/[^a-z0-9]+/gi, '-')} summary`, { hasText: 'Example' }).click();
    await expectAccessible(page, 'event types');
    await screenshot(page, 'event-types');
  });

  it("a webhook's page sends an example of the chosen type: delivered, marked svcexample, the result shown like a ping's", async () => {
    const rx: Receiver = await startReceiver();
    try {
      const api = svc.api(org);
      const hook = (await api.post('/v1/orgs/current/webhooks', { webhook_url: rx.hook('ex') })).body;
      await page.goto(`${dash}/${org.org_id}/webhooks/${hook.webhook_id}`);
      await page.getByLabel('Example of').selectOption('com.svc.drift.detected.v1');
      await Promise.all([
        page.waitForURL(`${dash}/${org.org_id}/webhooks/${hook.webhook_id}`),
        page.getByRole('button', { name: 'Send example' }).click(),
      ]);
      expect(await page.locator('.flash').innerText()).toMatch(
        new RegExp(
          `^Example of com\\.svc\\.drift\\.detected\\.v1 delivered to ${rx.hook('ex').replace(/[.]/g, '\\.')}: HTTP 200 in \\d+ ms\\.`,
        ),
      );
      await waitFor(() => rx.at('ex').length === 1, 5000, 'the example');
      expect(rx.at('ex')[0].json).toMatchObject({ type: 'com.svc.drift.detected.v1', svcexample: true, svcorgid: org.org_id });
      expect((await api.get(`/v1/events/${rx.at('ex')[0].json.id}`)).status).toBe(404);
      await expectAccessible(page, 'webhook page with the example form');
      await screenshot(page, 'webhook-example');
    } finally {
      await rx.close();
    }
  });

  it('signed out: a redirect to the login page', async () => {
    const res = await fetch(`${dash}/${org.org_id}/event-types`, { redirect: 'manual' });
    expect(res.status).toBe(302);
    expect(res.headers.get('location')).toContain('/dashboard/login');
  });
});
