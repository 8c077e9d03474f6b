// The dashboard's Rejections page (CONTRACT 9 "Durable ingest"): the org's facts that svc
// acknowledged and the engine refused later, newest first, with the fact in a <details>; reached from
// the navigation beside Events; producer text (subject, error, fact) escaped, never markup; another
// org's rows never shown; pages of 50; a foreign page link is 400. In headless Chromium, axe-clean.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { openDb } from '../../store/db.ts';
import { recordIngestRejections, type IngestRejectionInput } from '../../store/ingest-rejections.ts';
import { REJECTIONS_PAGE } from '../../src/dashboard/pages/ingest-rejections.tsx';
import { startService, type OrgCreds, type TestService } from '../helpers/service.ts';
import { expectAccessible, launchBrowser, screenshot, signedInPage } from '../helpers/browser.ts';
import { dashboardSession, type DashboardSession } from '../helpers/dashboard.ts';

const HOSTILE_SUBJECT = 'svc.ingest.x.<b id="subject-injected">bold</b>';
const HOSTILE_ERROR = 'workflow <script id="error-injected">alert(1)</script> belongs to a workflow svc started';
const HOSTILE_FACT = '<img id="fact-injected" src=x onerror=alert(1)> not JSON';

describe('dashboard: ingest rejections', () => {
  let svc: TestService;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let org: OrgCreds;
  let other: OrgCreds;
  let dash: string;
  let session: DashboardSession;

  beforeAll(async () => {
    [svc, browser] = await Promise.all([startService(), launchBrowser()]);
    org = svc.createOrg('rejections-dash');
    other = svc.createOrg('other-dash');
    dash = `${svc.url}/dashboard`;
    const now = Date.now();
    const row = (o: OrgCreds, n: number, fact: string): IngestRejectionInput => ({
      org_id: o.org_id,
      subject: `svc.ingest.${o.org_id}.workflows.wf_${n}`,
      received_at: now - 600_000 + n * 1000,
      error: `refused number ${n}`,
      fact,
    });
    const older = Array.from({ length: REJECTIONS_PAGE }, (_, i) => row(org, i, JSON.stringify({ kind: 'workflow', n: i })));
    const db = openDb(svc.db);
    db.transaction(() =>
      recordIngestRejections(db, [
        ...older,
        { ...row(other, 0, '{"secret_of_other": true}'), error: 'refused in the other org' },
        row(org, 98, JSON.stringify({ kind: 'workflow', note: '</pre><script id="json-injected">alert(2)</script>' })),
        { ...row(org, 99, HOSTILE_FACT), subject: HOSTILE_SUBJECT, error: HOSTILE_ERROR },
      ]),
    ).immediate();
    db.close();
    session = await dashboardSession(dash, org);
    ({ context, page } = await signedInPage(browser, dash, org));
  }, 60_000);

  afterAll(async () => {
    await context?.close();
    await browser?.close();
    await svc?.stop();
  });

  it('escapes producer text: subject, error and fact are shown as text, never as markup', async () => {
    const res = await session.get(`/${org.org_id}/ingest/rejections`);
    expect(res.status).toBe(200);
    const html = await res.text();
    expect(html).not.toContain('<b id="subject-injected">');
    expect(html).not.toContain('<script id="error-injected">');
    expect(html).not.toContain('<img id="fact-injected"');
    expect(html).not.toContain('<script id="json-injected">');
    expect(html).toContain('&lt;script id=&quot;error-injected&quot;&gt;');
    expect(html).toContain('&lt;img id=&quot;fact-injected&quot;');
    expect(html).not.toContain('secret_of_other');
  });

  it('is in the navigation; lists the newest first with the fact in a <details>; pages of 50', async () => {
    await page.goto(`${dash}/${org.org_id}`);
    await Promise.all([page.waitForURL(/\/ingest\/rejections$/), page.getByRole('link', { name: 'Rejections' }).click()]);
    await expect.poll(() => page.getByRole('link', { name: 'Rejections' }).getAttribute('aria-current')).toBe('page');
    const rows = page.locator('#rejections-table tbody tr');
    expect(await rows.count()).toBe(REJECTIONS_PAGE);
    const first = rows.nth(0);
    expect(await first.locator('td[data-label="Subject"]').textContent()).toBe(HOSTILE_SUBJECT);
    expect(await first.locator('td[data-label="Error"]').textContent()).toBe(HOSTILE_ERROR);
    expect(await page.locator('#subject-injected, #error-injected, #fact-injected, #json-injected').count()).toBe(0);
    // the fact, closed, then opened: as received
    const fact = first.locator('details pre');
    expect(await fact.isVisible()).toBe(false);
    await first.locator('details summary').click();
    expect(await fact.textContent()).toBe(HOSTILE_FACT);
    const second = rows.nth(1);
    await second.locator('details summary').click();
    expect(JSON.parse((await second.locator('details pre').textContent()) ?? '')).toEqual({
      kind: 'workflow',
      note: '</pre><script id="json-injected">alert(2)</script>',
    });
    expect(await rows.nth(2).locator('td[data-label="Error"]').textContent()).toBe(`refused number ${REJECTIONS_PAGE - 1}`);
    await expectAccessible(page, 'rejections');
    await screenshot(page, 'ingest-rejections');

    // the next page: the two oldest
    await Promise.all([page.waitForURL(/after=/), page.getByRole('link', { name: 'Next page' }).click()]);
    const errors = await page.locator('#rejections-table td[data-label="Error"]').allTextContents();
    expect(errors).toEqual(['refused number 1', 'refused number 0']);
    expect(await page.getByRole('link', { name: 'Next page' }).count()).toBe(0);
  });

  it("another org sees only its own; a page link of another org's list is 400", async () => {
    const theirs = await dashboardSession(dash, other);
    const html = await (await theirs.get(`/${other.org_id}/ingest/rejections`)).text();
    expect(html).toContain('secret_of_other');
    expect(html).not.toContain('refused number');
    const mine = await (await session.get(`/${org.org_id}/ingest/rejections`)).text();
    const next = /href="[^"]*\?after=([^"&]+)"/.exec(mine)?.[1];
    expect(next).toBeDefined();
    const foreign = await theirs.get(`/${other.org_id}/ingest/rejections?after=${next}`);
    expect(foreign.status).toBe(400);
    expect(await foreign.text()).not.toContain('refused number');
    expect((await theirs.get(`/${org.org_id}/ingest/rejections`)).status).toBe(404);
  });

  it('shows the first 16 KiB of a large fact, and says where the rest is', async () => {
    const big = svc.createOrg('big-facts');
    const fact = JSON.stringify({ kind: 'workflow', blob: 'x'.repeat(40_000), tail: 'THE-END' });
    const db = openDb(svc.db);
    db.transaction(() =>
      recordIngestRejections(db, [{ org_id: big.org_id, subject: 'svc.ingest.big', received_at: Date.now(), error: 'too late', fact }]),
    ).immediate();
    db.close();
    const html = await (await (await dashboardSession(dash, big)).get(`/${big.org_id}/ingest/rejections`)).text();
    expect(html).toContain('svc ingest rejections --json');
    expect(html).not.toContain('THE-END');
    expect(html.length).toBeLessThan(30_000);
  });
});
