// The dashboard's event history (CONTRACT 4.5, issue 18), driven in headless Chromium as an
// operator would after an outage: a receiver that is down misses events; the webhook's page lists
// the failed attempts; "Recover since…" sends them again (X-Svc-Recovery) with a progress page that
// refreshes while it runs; "Resend" shows its result; the Events page filters and pages, and an
// event's page shows its JSON and its attempts per webhook. Every page is axe-clean.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { startService, waitFor, type ApiClient, type OrgCreds, type TestService } from '../helpers/service.ts';
import { startReceiver, type Receiver } from '../helpers/receiver.ts';
import { expectAccessible, launchBrowser, newContext, screenshot, signedInPage, signIn } from '../helpers/browser.ts';
import { dashboardSession } from '../helpers/dashboard.ts';
import { get, post, waitWf } from '../helpers/workflows.ts';
import { ATTEMPTS_PAGE } from '../../src/dashboard/pages/webhook-history.tsx';

type Json = any;

const HOOKS = '/v1/orgs/current/webhooks';

describe('dashboard: events, attempts, recover and resend', () => {
  let svc: TestService;
  let rx: Receiver;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let org: OrgCreds;
  let other: OrgCreds;
  let api: ApiClient;
  let dash: string;
  let hook: string;
  let upHook: string;
  let appId: string;
  let okIds: string[];
  let failedIds: string[];
  let recoveryId: string;

  /**
   * Provision an install; once its workflow ended and its events were delivered, their ids (not the
   * delivery watchdog's about `down`, CONTRACT 4.1: those never go to it).
   */
  async function provision(name: string): Promise<string[]> {
    const before = new Set((await get(api, '/v1/events?limit=500')).data.map((e: Json) => e.id));
    const inst = await post(api, '/v1/installs', { app_id: appId, name });
    const wfs = await get(api, `/v1/installs/${inst.install_id}/workflows`);
    expect((await waitWf(api, wfs[0].workflow_id)).status).toBe('succeeded');
    await svc.settled(20_000);
    return (await get(api, '/v1/events?limit=500')).data
      .filter((e: Json) => e.type !== 'com.svc.webhook.delivery.v1')
      .map((e: Json) => e.id)
      .filter((id: string) => !before.has(id));
  }

  /** The attempt log of the webhook (outcomes reach it in batches: wait for `n` of them). */
  const attemptsAtLeast = (n: number) =>
    waitFor(
      async () => {
        const d = (await get(api, `${HOOKS}/${hook}/attempts?limit=500`)).data;
        return d.length >= n ? d : undefined;
      },
      10_000,
      `${n} attempts in the log`,
    );

  const rowIds = (p: Page, table: string) =>
    p.locator(`${table} tbody tr`).evaluateAll((rows) => rows.map((r) => r.getAttribute('data-event-id')));

  beforeAll(async () => {
    [svc, rx, browser] = await Promise.all([startService(), startReceiver(), launchBrowser()]);
    org = svc.createOrg('history-dash');
    other = svc.createOrg('other-dash');
    api = svc.api(org);
    dash = `${svc.url}/dashboard`;
    appId = (await post(api, '/v1/apps', { name: 'shop' })).app_id;
    await post(api, `/v1/apps/${appId}/configs`, { components: [{ name: 'api' }] });
    hook = (await post(api, HOOKS, { webhook_url: rx.hook('down') })).webhook_id;
    upHook = (await post(api, HOOKS, { webhook_url: rx.hook('up') })).webhook_id; // a receiver that stays up
    ({ context, page } = await signedInPage(browser, dash, org));
  }, 60_000);

  afterAll(async () => {
    await context?.close();
    await browser?.close();
    await rx?.close();
    await svc?.stop();
  });

  it('a receiver that is down misses events; the webhook page lists its attempts newest first, and "Failed only" the failed ones', async () => {
    okIds = await provision('eu-1'); // the receiver is up
    expect(okIds.length).toBeGreaterThanOrEqual(4);
    rx.set('down', { status: 503 });
    failedIds = await provision('eu-2'); // all of these fail
    const log = await attemptsAtLeast(okIds.length + failedIds.length);

    await page.goto(`${dash}/${org.org_id}/webhooks/${hook}`);
    await expect(page.getByRole('heading', { name: 'Attempts' }).isVisible()).resolves.toBe(true);
    // all attempts, newest first: the order of the API's attempt log
    expect(await rowIds(page, '#attempts-table')).toEqual(log.slice(0, ATTEMPTS_PAGE).map((a: Json) => a.event_id));
    expect(log.slice(0, ATTEMPTS_PAGE).some((a: Json) => a.outcome === 'success')).toBe(true);

    await Promise.all([page.waitForURL(/outcome=failure/), page.getByRole('link', { name: 'Failed only' }).click()]);
    const failedRows = page.locator('#attempts-table tbody tr');
    expect((await rowIds(page, '#attempts-table')).sort()).toEqual([...failedIds].sort());
    await expect(page.locator('#attempts-table tr.attempt-success').count()).resolves.toBe(0);
    for (const text of await failedRows.allTextContents()) {
      expect(text).toContain('failure');
      expect(text).toContain('503');
      expect(text).toContain('automatic');
    }
    await expect(page.getByRole('link', { name: 'Failed only' }).getAttribute('aria-current')).resolves.toBe('true');
    await screenshot(page, 'webhook-attempts-failed');
    await expectAccessible(page, 'webhook page, failed attempts');
  });

  it('"Recover since…" shows the recovery and its progress, refreshing until done; every missed event arrives once with X-Svc-Recovery', async () => {
    // the receiver is back, slow enough that the recovery is seen running
    rx.set('down', { status: 200, delayMs: 2500 });
    const seen = rx.at('down').length;
    const bctx = await newContext(browser);
    await bctx.clock.install(); // the page's refresh timer moves when the test says
    try {
      const p = await bctx.newPage();
      await signIn(p, dash, org, `/dashboard/${org.org_id}/webhooks/${hook}`);
      await expect(p.getByRole('heading', { name: 'Recover since…' }).isVisible()).resolves.toBe(true);
      await expect(p.getByLabel('Only the events that never got through to it (failed or missed)').isChecked()).resolves.toBe(true);
      await p.getByLabel('Since', { exact: true }).fill('1h');
      await Promise.all([p.waitForURL(/\/recoveries\//), p.getByRole('button', { name: 'Recover' }).click()]);
      recoveryId = decodeURIComponent(new URL(p.url()).pathname.split('/').pop()!);
      expect(recoveryId).toMatch(/^rcv_/);
      const flashText = await p.locator('.flash.ok').textContent();
      expect(flashText).toContain(`Recovery ${recoveryId} started: ${failedIds.length} event(s)`);
      await expect(p.locator('#recovery-events').textContent()).resolves.toBe(String(failedIds.length));
      await expect(p.locator('#recovery-state').textContent()).resolves.toBe('running');
      // it reloads itself while running
      await expect(p.getByLabel('Refresh this page every 3 s').isChecked()).resolves.toBe(true);
      await screenshot(p, 'recovery-running');
      await expectAccessible(p, 'recovery running');
      const reloaded = p.waitForEvent('load', { timeout: 10_000 });
      await p.clock.runFor(3000);
      await reloaded;
      // until done (then no refresh any more)
      await waitFor(
        async () => {
          if ((await p.locator('#recovery-state').textContent()) === 'done') return true;
          await p.reload();
          return false;
        },
        30_000,
        'the recovery page to say done',
      );
      await expect(p.locator('#recovery-attempted').textContent()).resolves.toBe(String(failedIds.length));
      await expect(p.locator('#recovery-succeeded').textContent()).resolves.toBe(String(failedIds.length));
      await expect(p.locator('#recovery-failed').textContent()).resolves.toBe('0');
      await expect(p.locator('[data-refresh-seconds]').count()).resolves.toBe(0);
      await expectAccessible(p, 'recovery done');
    } finally {
      await bctx.close();
    }
    rx.set('down', { status: 200 });
    await svc.settled(10_000);
    const recovered = rx.at('down').slice(seen);
    expect(recovered.map((x) => x.json.id).sort()).toEqual([...failedIds].sort());
    for (const x of recovered) expect(x.headers['x-svc-recovery']).toBe(recoveryId);

    // the attempt log on the page: the recovered ones, newest first, with the recovery linked
    await attemptsAtLeast(okIds.length + 2 * failedIds.length);
    await page.goto(`${dash}/${org.org_id}/webhooks/${hook}`);
    const newest = page.locator('#attempts-table tbody tr').first();
    await expect(newest.textContent()).resolves.toContain(`recovery ${recoveryId}`);
    await expect(newest.getAttribute('class')).resolves.toContain('attempt-success');
  });

  it('a recover with a bad time is refused on the page (400), queueing nothing', async () => {
    await page.goto(`${dash}/${org.org_id}/webhooks/${hook}`);
    const before = rx.at('down').length;
    await page.getByLabel('Since', { exact: true }).fill('soon');
    await page.getByLabel('Only the events that never got through to it (failed or missed)').uncheck();
    const [res] = await Promise.all([
      page.waitForResponse((r) => r.url().endsWith('/recover')),
      page.getByRole('button', { name: 'Recover' }).click(),
    ]);
    expect(res.status()).toBe(400);
    await page.waitForLoadState();
    await expect(page.locator('#recover [role=alert]').textContent()).resolves.toContain('since');
    // what was typed is kept
    await expect(page.getByLabel('Since', { exact: true }).inputValue()).resolves.toBe('soon');
    await expect(page.getByLabel('Only the events that never got through to it (failed or missed)').isChecked()).resolves.toBe(false);
    await expectAccessible(page, 'recover refused');
    await svc.settled(10_000);
    expect(rx.at('down').length).toBe(before);
  });

  it('"Resend" on an attempt sends its event again now and shows the result (delivered, or the status and error)', async () => {
    const id = failedIds[0];
    const seen = rx.at('down').length;
    await page.goto(`${dash}/${org.org_id}/webhooks/${hook}?outcome=failure`);
    await Promise.all([page.waitForURL(/outcome=failure#attempts$/), page.getByRole('button', { name: `Resend event ${id}` }).click()]);
    const ok = await page.locator('.flash.ok').textContent();
    expect(ok).toContain('delivered, HTTP 200');
    expect(ok).toContain(id);
    const got = rx.at('down').slice(seen);
    expect(got).toHaveLength(1);
    expect(got[0].json.id).toBe(id);
    expect(got[0].headers['x-svc-recovery']).toBe('resend');

    rx.set('down', { status: 500 });
    await page.getByRole('button', { name: `Resend event ${id}` }).click();
    await page.waitForSelector('.flash.error');
    const bad = await page.locator('.flash.error').textContent();
    expect(bad).toContain('was not delivered');
    expect(bad).toContain('500');
    rx.set('down', { status: 200 });
    // the failed resend is the newest failed attempt
    await expect(page.locator('#attempts-table tbody tr').first().textContent()).resolves.toContain('resend');
    await screenshot(page, 'webhook-resend-failed');
    await expectAccessible(page, 'webhook page after a failed resend');
  });

  it('the Events page (in the navigation) lists the kept events newest first, filters by type and subject prefix, pages with "Next page", and turns to oldest first', async () => {
    const oldestFirst = (await get(api, '/v1/events?limit=500')).data as Json[]; // the API's order
    const all = [...oldestFirst].reverse(); // the page's: newest first (CONTRACT 7)
    await page.goto(`${dash}/${org.org_id}`);
    await Promise.all([
      page.waitForURL(/\/events$/),
      page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Events' }).click(),
    ]);
    await expect(page.title()).resolves.toBe('Events · svc');
    expect(await rowIds(page, '#events-table')).toEqual(all.map((e) => e.id));
    await screenshot(page, 'events');
    await expectAccessible(page, 'events page');

    const type = all.find((e) => e.id === failedIds[0]).type;
    await page.getByLabel('Type').fill(type);
    await Promise.all([page.waitForURL(/type=/), page.getByRole('button', { name: 'Filter' }).click()]);
    const ofType = all.filter((e) => e.type === type).map((e) => e.id);
    expect(ofType.length).toBeLessThan(all.length);
    expect(await rowIds(page, '#events-table')).toEqual(ofType);

    // the second install's events: its subject prefix
    const subject: string = all.find((e) => e.id === failedIds[0]).subject;
    const prefix = subject.split('/').slice(0, 3).join('/');
    const bySubject = all.filter((e) => e.subject.startsWith(prefix)).map((e) => e.id);
    expect(bySubject.length).toBeGreaterThan(0);
    expect(bySubject.length).toBeLessThan(all.length);
    await page.getByLabel('Type').fill('');
    await page.getByLabel('Subject prefix').fill(prefix);
    await page.getByLabel('Since', { exact: true }).fill('1h');
    await Promise.all([page.waitForURL(/subject_prefix=/), page.getByRole('button', { name: 'Filter' }).click()]);
    expect(await rowIds(page, '#events-table')).toEqual(bySubject);
    await page.getByLabel('Since', { exact: true }).fill(new Date(Date.now() + 3_600_000).toISOString());
    await Promise.all([page.waitForURL(/since=20/), page.getByRole('button', { name: 'Filter' }).click()]);
    await expect(page.locator('#no-events').textContent()).resolves.toContain('No kept events match these filters');

    // pages of 3 give the whole list, newest first; "Oldest first" turns it (kept across pages)
    const pageThrough = async () => {
      const paged: string[] = [];
      for (;;) {
        const ids = (await rowIds(page, '#events-table')) as string[];
        expect(ids.length).toBeLessThanOrEqual(3);
        paged.push(...ids);
        const next = page.getByRole('link', { name: 'Next page' });
        if (!(await next.count())) break;
        await Promise.all([page.waitForURL(/after=/), next.click()]);
        await expect(page.getByRole('link', { name: 'First page' }).count()).resolves.toBe(1);
      }
      return paged;
    };
    await page.goto(`${dash}/${org.org_id}/events?limit=3`);
    expect(await pageThrough()).toEqual(all.map((e) => e.id));
    await page.goto(`${dash}/${org.org_id}/events?limit=3`);
    await Promise.all([page.waitForURL(/order=oldest/), page.getByRole('link', { name: 'Oldest first' }).click()]);
    expect(await pageThrough()).toEqual(oldestFirst.map((e) => e.id));
    expect(page.url()).toContain('order=oldest');
    await expectAccessible(page, 'events page, oldest first');
    // and back
    await Promise.all([page.waitForURL((u) => !u.search.includes('order=')), page.getByRole('link', { name: 'Newest first' }).click()]);
    expect((await rowIds(page, '#events-table'))[0]).toBe(all[0].id);

    // a bad filter: 400, naming it
    const res = await page.goto(`${dash}/${org.org_id}/events?since=yesterday`);
    expect(res?.status()).toBe(400);
    await expect(page.getByRole('alert').textContent()).resolves.toContain('since');
    await expectAccessible(page, 'events page, bad filter');
  });

  it("an event's page shows its CloudEvent JSON and its attempts per webhook, and resends from there", async () => {
    const id = failedIds[1];
    const event = await get(api, `/v1/events/${id}`);
    await page.goto(`${dash}/${org.org_id}/events?type=${encodeURIComponent(event.type)}`);
    await Promise.all([page.waitForURL(new RegExp(`/events/${id}$`)), page.getByRole('link', { name: id }).click()]);
    await expect(page.title()).resolves.toBe(`Event ${event.type} · svc`);
    expect(JSON.parse((await page.getByLabel('CloudEvent JSON').textContent())!)).toEqual(event);
    const card = page.locator(`#event-attempts [data-webhook-id="${hook}"]`);
    await expect(card.getByRole('link', { name: rx.hook('down') }).count()).resolves.toBe(1);
    // newest first: the recovery's success, then the automatic attempt's 503
    const rows = await card.locator('tbody tr').allTextContents();
    expect(rows).toHaveLength(2);
    expect(rows[0]).toContain(`recovery ${recoveryId}`);
    expect(rows[0]).toContain('success');
    expect(rows[1]).toContain('503');
    expect(rows[1]).toContain('automatic');
    // the webhook that was up: its one automatic attempt, in a card of its own
    const upCard = page.locator(`#event-attempts [data-webhook-id="${upHook}"]`);
    const upRows = await upCard.locator('tbody tr').allTextContents();
    expect(upRows).toHaveLength(1);
    expect(upRows[0]).toContain('success');
    expect(upRows[0]).toContain('automatic');
    await expect(page.locator('#event-attempts [data-webhook-id]').count()).resolves.toBe(2);
    await screenshot(page, 'event');
    await expectAccessible(page, 'event page');

    const seen = rx.at('down').length;
    await Promise.all([
      page.waitForURL(new RegExp(`/events/${id}$`)),
      card.getByRole('button', { name: `Resend to ${rx.hook('down')}` }).click(),
    ]);
    await expect(page.locator('.flash.ok').textContent()).resolves.toContain('delivered, HTTP 200');
    expect(
      rx
        .at('down')
        .slice(seen)
        .map((x) => [x.json.id, x.headers['x-svc-recovery']]),
    ).toEqual([[id, 'resend']]);
    await expect(page.locator(`#event-attempts [data-webhook-id="${hook}"] tbody tr`).count()).resolves.toBe(3);
  });

  it("another org's event is 404, its events page does not list ours, and the forms need the CSRF token", async () => {
    const id = failedIds[0];
    // signed in as the other org: our event is not there
    const theirs = await dashboardSession(dash, other);
    const res = await theirs.get(`/${other.org_id}/events/${id}`);
    expect(res.status).toBe(404);
    const list = await theirs.get(`/${other.org_id}/events`);
    expect(list.status).toBe(200);
    expect(await list.text()).not.toContain(id);
    // our session on the other org's pages: 404
    const r2 = await page.goto(`${dash}/${other.org_id}/events/${id}`);
    expect(r2?.status()).toBe(404);
    await expect(page.locator('h1').textContent()).resolves.toBe('Not found');
    const ours = await dashboardSession(dash, org);
    expect((await ours.get(`/${org.org_id}/events/evt_nope`)).status).toBe(404);
    expect((await ours.get(`/${org.org_id}/webhooks/${hook}/recoveries/rcv_nope`)).status).toBe(404);
    expect((await theirs.get(`/${other.org_id}/webhooks/${hook}/recoveries/${recoveryId}`)).status).toBe(404);

    // a form without its CSRF token is refused and sends nothing
    const seen = rx.at('down').length;
    const cookie = (await context.cookies()).find((c) => c.name === 'svc_session')!;
    for (const [p, form] of [
      ['resend', { event_id: id }],
      ['recover', { since: '1h' }],
    ] as const) {
      const r = await fetch(`${dash}/${org.org_id}/webhooks/${hook}/${p}`, {
        method: 'POST',
        redirect: 'manual',
        headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: `svc_session=${cookie.value}` },
        body: new URLSearchParams(form),
      });
      expect(r.status, p).toBe(403);
    }
    // another org's webhook: 404
    const viaOther = await theirs.submit(`/${other.org_id}/events`, `/${other.org_id}/webhooks/${hook}/resend`, { event_id: id });
    expect(viaOther.status).toBe(404);
    await svc.settled(10_000);
    expect(rx.at('down').length).toBe(seen);
  });
});
