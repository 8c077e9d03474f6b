// The dashboard's delivery watchdog (CONTRACT 4.1, issue 30), driven in headless Chromium: a receiver
// answering 500 gets its webhook disabled by disable_after; its page shows the state, the streak and
// the reason, and the attempts per hour over 24 h as a server-rendered SVG; "Enable and catch up"
// is refused while the receiver still fails, then enables it and recovers what it missed; "Disable"
// takes a note. Every page is axe-clean.
import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { startService, waitFor, type ApiClient, type OrgCreds, type TestService } from '../helpers/service.ts';
import { startReceiver, type Receiver } from '../helpers/receiver.ts';
import { expectAccessible, launchBrowser, screenshot, signedInPage } from '../helpers/browser.ts';
import { factProducer, type FactProducer } from '../helpers/tenancy.ts';
import { get, post } from '../helpers/workflows.ts';

const HOOKS = '/v1/orgs/current/webhooks';

describe('dashboard: the delivery watchdog', () => {
  let svc: TestService;
  let rx: Receiver;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let org: OrgCreds;
  let api: ApiClient;
  let producer: FactProducer;
  let down: string;
  let dash: string;

  const facts = async (n: number) => {
    for (let i = 0; i < n; i++) await producer.fact(org.org_id);
  };
  /** the chart's counts summed over its 24 bars (a test may run across an hour's end) */
  const totals = async (p: Page) =>
    (await hours(p)).reduce((a, h) => ({ success: a.success + h.success, failure: a.failure + h.failure }), { success: 0, failure: 0 });
  const hours = (p: Page) =>
    p
      .locator('#attempts-chart g.hour')
      .evaluateAll((gs) =>
        gs.map((g) => ({ success: Number(g.getAttribute('data-success')), failure: Number(g.getAttribute('data-failure')) })),
      );

  beforeAll(async () => {
    [svc, rx, browser] = await Promise.all([startService(), startReceiver(), launchBrowser()]);
    org = svc.createOrg('watchdog-dash');
    api = svc.api(org);
    dash = `${svc.url}/dashboard`;
    producer = await factProducer({ natsUrl: null, bus: svc.server.bus });
    rx.set('down', { status: 500 });
    down = (await post(api, HOOKS, { webhook_url: rx.hook('down'), disable_after: { failures: 10, duration: '0s' } })).webhook_id;
    await post(api, HOOKS, { webhook_url: rx.hook('up') });
    ({ context, page } = await signedInPage(browser, dash, org));
  }, 60_000);

  afterAll(async () => {
    await producer?.close();
    await context?.close();
    await browser?.close();
    await svc?.stop();
    await rx?.close();
  });

  it("a disabled webhook's page: state, streak, reason, and 24 hourly bars by outcome", async () => {
    await facts(10);
    await waitFor(async () => (await get(api, `${HOOKS}/${down}`)).delivery_status.state === 'disabled', 10_000, 'disabled');
    await facts(4); // missed while disabled
    await svc.settled();
    await page.goto(`${dash}/${org.org_id}/webhooks`);
    await expect.poll(() => page.locator(`#webhook-${down} td[data-label="State"]`).innerText()).toBe('disabled');
    await page.goto(`${dash}/${org.org_id}/webhooks/${down}`);
    await expect.poll(() => page.locator('#watchdog-badge').innerText()).toBe('disabled');
    expect(await page.locator('#watchdog-streak').innerText()).toBe('10');
    expect(await page.locator('#watchdog-state').innerText()).toMatch(/Why\s+auto: 10 consecutive failures since /);
    const bars = await hours(page);
    expect(bars).toHaveLength(24);
    expect(await totals(page)).toEqual({ success: 0, failure: 10 });
    expect(bars.filter((h) => h.failure > 0).length).toBeLessThanOrEqual(2);
    expect(await page.locator('#attempts-chart > title').textContent()).toBe(
      'Attempts per hour over the last 24 hours: 0 succeeded, 10 failed.',
    );
    // each bar drawn to the axis' scale (its top is 10): 10 failures fill the 108 px plot
    const drawn = await page.locator('#attempts-chart g.hour').evaluateAll((gs) =>
      gs
        .filter((g) => g.querySelector('rect.bar-failure'))
        .map((g) => ({
          n: Number(g.getAttribute('data-failure')),
          h: Number(g.querySelector('rect.bar-failure')!.getAttribute('height')),
        })),
    );
    expect(drawn.reduce((a, d) => a + d.n, 0)).toBe(10);
    for (const d of drawn) expect(d.h).toBeCloseTo((108 * d.n) / 10, 5);
    expect(await page.locator('#attempts-chart rect.bar-success').count()).toBe(0);
    await expectAccessible(page, 'webhook page, disabled');
    await screenshot(page, 'watchdog-disabled');
    await page.locator('#watchdog').screenshot({ path: '/tmp/watchdog-disabled.png' });
  });

  it('"Enable and catch up" is refused while the receiver fails; once it answers, enabled and caught up', async () => {
    await page.getByRole('button', { name: 'Enable and catch up' }).click();
    await page.waitForURL(/#watchdog$/);
    await expect.poll(() => page.locator('.flash.error').innerText()).toMatch(/still disabled: its ping was not delivered \(HTTP 500\)/);
    expect(await page.locator('#watchdog-badge').innerText()).toBe('disabled');

    rx.set('down', { status: 200 });
    const before = rx.at('down').length;
    await page.getByRole('button', { name: 'Enable and catch up' }).click();
    await page.waitForURL(/#watchdog$/);
    await expect.poll(() => page.locator('.flash.ok').innerText()).toMatch(/enabled; catching up \(recovery rcv_/);
    expect(await page.locator('#watchdog-badge').innerText()).toBe('active');
    // the 10 that failed and the 4 it missed while disabled, once each, with X-Svc-Recovery
    await waitFor(
      () =>
        rx
          .at('down')
          .slice(before)
          .filter((r) => r.headers['x-svc-recovery']).length >= 14,
      15_000,
      'the catch-up',
    );
    await svc.settled();
    const caught = rx
      .at('down')
      .slice(before)
      .filter((r) => r.headers['x-svc-recovery']);
    expect(new Set(caught.map((r) => r.json.id)).size).toBe(14);
    expect(caught.length).toBe(14);
    // outcomes reach the attempt log in batches
    await expect
      .poll(async () => {
        await page.reload();
        return (await totals(page)).success;
      })
      .toBe(15); // the ping and the 14
    expect((await totals(page)).failure).toBe(11); // the 10 and the refused ping
    await expectAccessible(page, 'webhook page, active');
    await page.locator('#watchdog').screenshot({ path: '/tmp/watchdog-active.png' });
  });

  it('"Disable" with a note: disabled, the note is the reason; nothing is delivered', async () => {
    await page.getByLabel('Note (optional)').fill('moving the receiver');
    await page.getByRole('button', { name: 'Disable' }).click();
    await page.waitForURL(/#watchdog$/);
    await expect.poll(() => page.locator('#watchdog-badge').innerText()).toBe('disabled');
    expect(await page.locator('#watchdog-state').innerText()).toMatch(/Why\s+moving the receiver/);
    const n = rx.at('down').length;
    await facts(2);
    await svc.settled();
    expect(rx.at('down').length).toBe(n);
    expect(fs.existsSync('/tmp/watchdog-active.png')).toBe(true);
  });
});
