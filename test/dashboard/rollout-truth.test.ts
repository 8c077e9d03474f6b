// Issue 56 items 2 and 6, the dashboard's side, driven in headless Chromium (pages checked by
// axe-core): the rollout page tells what each gate saw (the verdicts of a bake with how long each
// lasted and what the gate's `for` tolerated, each verification request's answer, the change
// windows waited for by name and for how long); the overview's recent workflows include branch
// runs and fleet rollbacks (one waiting for approval); the fleet-rollback form's verification
// fields reach the run. A real svc in process on a ManualClock, health verdicts published on the
// ingest subject like a health checker (CONTRACT 5.2).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { ManualClock } from '../helpers/clock.ts';
import { startService, waitFor, type ApiClient, type OrgCreds, type TestService } from '../helpers/service.ts';
import { expectAccessible, launchBrowser, screenshot, signedInPage } from '../helpers/browser.ts';
import { verificationsOf } from '../../src/domain/verification.ts';
import {
  appWithThreeConfigs,
  get,
  installWith as installWithHistory,
  post,
  waitStep,
  waitWf,
  healthVerdict,
} from '../helpers/workflows.ts';
import { rid } from '../helpers/ids.ts';
import { getWorkflow } from '../../store/workflows.ts';
import { startReceiver } from '../helpers/receiver.ts';

type Json = any;

const cfg = (image: string) => ({
  sandbox: { size: 'small' },
  components: [
    { name: 'api', values: { image } },
    { name: 'worker', values: { image: 'worker:1' } },
  ],
});

let svc: TestService;
let org: OrgCreds;
let api: ApiClient;
let browser: Browser;
let context: BrowserContext;
let page: Page;
let dash: string;
// a Wednesday, midnight UTC
const clock = new ManualClock(Date.parse('2026-04-01T00:00:00.000Z'));

beforeAll(async () => {
  [svc, browser] = await Promise.all([startService({}, { clock }), launchBrowser()]);
  org = svc.createOrg('dash-rollout-truth');
  api = svc.api(org);
  dash = `${svc.url}/dashboard`;
  ({ context, page } = await signedInPage(browser, dash, org));
}, 60_000);
afterAll(async () => {
  await context?.close();
  await browser?.close();
  await svc?.stop();
});

const app3 = () => appWithThreeConfigs(api, rid('shop'), cfg);
const installWith = (appId: string, cfgId: string, labels: Record<string, string> = {}, then: string[] = []): Promise<Json> =>
  installWithHistory(api, rid('inst'), appId, cfgId, labels, then);

/** A health checker's verdict on one component (CONTRACT 5.2), answered once committed. */
const verdict = (install: Json, component: string, v: string, reason?: string) =>
  healthVerdict(svc, org.org_id, install, component, v, reason);

const section = (heading: string | RegExp) => page.locator('section').filter({ has: page.getByRole('heading', { name: heading }) });

describe('the rollout page tells what each gate saw', () => {
  it('a degraded blip shorter than `for`: each verdict of the bake with how long it lasted, the blip tolerated by `for`; the window waited for by name; each verification answer', {
    timeout: 120_000,
  }, async () => {
    const rcv = await startReceiver();
    try {
      const { app, v1, v2 } = await app3();
      const x = await installWith(app.app_id, v1.app_config_id);
      const branch = await post(api, `/v1/apps/${app.app_id}/branches`, {
        name: 'main',
        install_groups: [{ name: 'canary', install_ids: [x.install_id] }],
      });
      // a deny window over the first half hour of the day holds the install
      await post(api, `/v1/apps/${app.app_id}/change-windows`, {
        name: 'midnight freeze',
        kind: 'deny',
        days: ['wed'],
        start: '00:00',
        duration: '30m',
        time_zone: 'UTC',
      });
      let asked = 0;
      rcv.set('truth', { answer: () => (asked++ === 0 ? { status: 202 } : { status: 200, body: '{"verdict":"pass"}' }) });
      await verdict(x, 'api', 'healthy');
      const run = await post(api, `/v1/apps/${app.app_id}/branches/${branch.app_branch_id}/runs`, {
        app_config_id: v2.app_config_id,
        skip_builds: true,
        health_gate: { bake: '20s', for: '10s' },
        verification: [{ url: rcv.hook('truth'), interval: '10s' }],
      });
      const W = run.workflow_id;
      const { step } = await waitStep(api, W, 'plan install group: canary', 'awaiting_approval');
      await post(api, `/v1/workflows/${W}/steps/${step.step_id}/approval`, { response: 'approved' }, 200);

      // held by the window: named, and for how long so far
      await waitFor(
        async () => (await get(api, `/v1/workflows/${W}`)).steps.some((s: Json) => s.name.startsWith('wait') && s.status === 'started'),
        10_000,
        'the wait for the window',
      );
      clock.advance(5 * 60_000);
      await page.goto(`${dash}/${org.org_id}/workflows/${W}`);
      await expect(page.locator('.window-wait').first().textContent()).resolves.toMatch(
        /^Held by change window midnight freeze for 5 min so far; starts when it opens/,
      );
      await screenshot(page, 'rollout-truth-window');

      // the window closes: the install deploys, verification asks (pending, then pass)
      clock.advance(25 * 60_000);
      await waitFor(() => rcv.at('truth').length === 1, 15_000, 'the first verification request');
      await waitFor(
        async () => JSON.stringify(await get(api, `/v1/workflows/${W}`)).includes('"verify install group: canary"'),
        5000,
        'verify step',
      );
      await svc.settled();
      clock.advance(10_000);
      await waitStep(api, W, 'bake install group: canary', 'started');

      // the bake (20s, `for` 10s): healthy, a 4 s degraded blip, healthy again
      clock.advance(3000);
      await verdict(x, 'api', 'degraded', 'p99 over 2s');
      clock.advance(4000);
      await verdict(x, 'api', 'healthy');
      await page.reload();
      const bake = section(/^Group 1: canary/).locator('.bake');
      await expect(bake.locator('tr.bake-verdict[data-verdict=degraded] td.lasted').textContent()).resolves.toBe('4 s');
      clock.advance(13_000);
      expect((await waitWf(api, W)).status).toBe('succeeded');

      await page.reload();
      const rows = bake.locator('tr.bake-verdict');
      await expect(rows.count()).resolves.toBe(3);
      const cells = async (n: number) => (await rows.nth(n).locator('td').allTextContents()).map((t) => t.replace(/\s+/g, ' ').trim());
      const [healthy, blip, back] = [await cells(0), await cells(1), await cells(2)];
      expect(healthy[0]).toMatch(/^\+0 s/);
      expect(healthy.slice(1, 5)).toEqual([x.name, 'api', 'healthy', '3 s']);
      expect(blip[0]).toMatch(/^\+3 s/);
      expect(blip.slice(1, 5)).toEqual([x.name, 'api', 'degraded p99 over 2s', '4 s']);
      expect(blip[5]).toBe("tolerated by the gate's for (10 s): bad for 4 s, it ended before lasting 10 s");
      expect(back[0]).toMatch(/^\+7 s/);
      expect(back[4]).toBe("13 s (to the bake's end)");
      await expect(bake.locator('.bake-left').textContent()).resolves.toBe(
        "Passed: the 20s bake ended without a trip; 1 bad verdict was tolerated, ending before it lasted the gate's for (10 s).",
      );
      // each verification request's answer
      const answers = (
        await section(/^Group 1: canary/)
          .locator('ol.verify-answers li')
          .allTextContents()
      ).map((t) => t.replace(/\s+/g, ' ').trim());
      expect(answers).toEqual([
        `+0 s ${rcv.hook('truth')} request 1: pending HTTP 202`,
        `+10 s ${rcv.hook('truth')} request 2: pass HTTP 200`,
      ]);
      // the window waited for, by name, and how long
      await expect(page.locator('.window-wait').first().textContent()).resolves.toMatch(
        /^Waited 30 min for change window midnight freeze \(until /,
      );
      const html = await page.content();
      expect(html).not.toContain('cw_'); // windows by name, never by id
      await screenshot(page, 'rollout-truth-passed');
      await page.screenshot({ path: '/tmp/rollout-truth-passed.png', fullPage: true });
      await expectAccessible(page, 'rollout page with a tolerated blip');
    } finally {
      await rcv.close();
    }
  });
});

describe("the overview's recent workflows", () => {
  it('include branch runs and fleet rollbacks, one waiting for approval marked, each with what it is for', {
    timeout: 90_000,
  }, async () => {
    // an org of its own: only this test's workflows
    const other = svc.createOrg('dash-overview-rollouts');
    const theirs = svc.api(other);
    const { context: ctx2, page: p2 } = await signedInPage(browser, dash, other);
    try {
      const { app, v1, v2 } = await appWithThreeConfigs(theirs, rid('shop'), cfg);
      const x = await installWithHistory(theirs, rid('inst'), app.app_id, v1.app_config_id, {}, [v2.app_config_id]);
      const branch = await post(theirs, `/v1/apps/${app.app_id}/branches`, {
        name: 'main',
        install_groups: [{ name: 'all', install_ids: [x.install_id] }],
      });
      const run = await post(theirs, `/v1/apps/${app.app_id}/branches/${branch.app_branch_id}/runs`, {
        app_config_id: v1.app_config_id,
        skip_builds: true,
      });
      await waitStep(theirs, run.workflow_id, 'plan install group: all', 'awaiting_approval');
      await post(theirs, `/v1/workflows/${run.workflow_id}/cancel`, undefined, 200);
      await waitWf(theirs, run.workflow_id);
      clock.advance(1000);
      const rb = await post(theirs, `/v1/apps/${app.app_id}/rollbacks`, { to: 'previous' });
      const RB = rb.workflow_id;
      await waitStep(theirs, RB, 'plan install group: all', 'awaiting_approval');

      await p2.goto(`${dash}/${other.org_id}`);
      const recent = p2.locator('section').filter({ has: p2.getByRole('heading', { name: 'Recent workflows' }) });
      const rows = (await recent.locator('tbody tr').allTextContents()).map((t) => t.replace(/\s+/g, ' ').trim());
      expect(rows[0]).toContain(`app_rollback ${RB} awaiting approval`);
      expect(rows[0]).toContain(`fleet rollback of app ${app.name}`);
      expect(rows.find((r) => r.includes(run.workflow_id))).toContain(`branch main of app ${app.name}`);
      expect(rows.find((r) => r.includes(run.workflow_id))).not.toContain('awaiting approval');
      expect(rows.filter((r) => r.includes(x.name)).length).toBeGreaterThanOrEqual(2); // the install's own workflows too
      await expect(recent.getByRole('link', { name: 'awaiting approval' }).getAttribute('href')).resolves.toBe(
        `/dashboard/${other.org_id}/approvals`,
      );
      await expect(recent.getByRole('link', { name: 'app_rollback' }).getAttribute('href')).resolves.toBe(
        `/dashboard/${other.org_id}/workflows/${RB}`,
      );
      await p2.screenshot({ path: '/tmp/overview-rollouts.png', fullPage: true });
      await screenshot(p2, 'overview-rollouts');
      await expectAccessible(p2, 'overview with rollouts');
      await post(theirs, `/v1/workflows/${RB}/cancel`, undefined, 200);
    } finally {
      await ctx2.close();
    }
  });
});

describe('the fleet-rollback form', () => {
  it("takes verifications (URLs, one per line, a secret, an interval) that reach the run's params; the secret signs the requests and is never shown", {
    timeout: 90_000,
  }, async () => {
    const rcv = await startReceiver();
    try {
      const { app, v1, v2 } = await app3();
      const x = await installWith(app.app_id, v1.app_config_id, {}, [v2.app_config_id]);
      await page.goto(`${dash}/${org.org_id}/apps/${app.app_id}`);
      await Promise.all([page.waitForURL(/\/rollback\?/), page.getByRole('button', { name: 'Plan fleet rollback' }).click()]);
      // a secret without a URL is refused, nothing starts
      await page.getByLabel('Verification secret (optional)').fill('whsec_c2VjcmV0IG9mIHRoZSBmb3JtIHRlc3Q=');
      await page.getByRole('button', { name: 'Apply fleet rollback' }).click();
      await expect(page.getByRole('alert').first().textContent()).resolves.toContain('verification.0.url');
      await expect(page.getByLabel('Verification secret (optional)').inputValue()).resolves.toBe(''); // never shown back
      // a bad interval: the API's own message
      await page.getByLabel('Verification URLs, one per line').fill(`${rcv.hook('form')}?token=hidden`);
      await page.getByLabel('Verification secret (optional)').fill('whsec_c2VjcmV0IG9mIHRoZSBmb3JtIHRlc3Q=');
      await page.getByLabel('Ask again every').fill('2s');
      await page.getByRole('button', { name: 'Apply fleet rollback' }).click();
      await expect(page.getByRole('alert').first().textContent()).resolves.toContain('from 10s to 10m');
      await expect(page.getByLabel('Verification URLs, one per line').inputValue()).resolves.toBe(`${rcv.hook('form')}?token=hidden`);
      expect(await page.content()).not.toContain('whsec_');
      await expectAccessible(page, 'fleet rollback plan with verification fields');
      await page.screenshot({ path: '/tmp/fleet-rollback-verification.png', fullPage: true });

      rcv.set('form', { answer: () => ({ status: 200, body: '{"verdict":"pass"}' }) });
      rcv.set('form2', { answer: () => ({ status: 200, body: '{"verdict":"pass"}' }) });
      await page.getByLabel('Verification URLs, one per line').fill(`${rcv.hook('form')}?token=hidden\n${rcv.hook('form2')}`);
      await page.getByLabel('Verification secret (optional)').fill('whsec_c2VjcmV0IG9mIHRoZSBmb3JtIHRlc3Q=');
      await page.getByLabel('Ask again every').fill('20s');
      await page.getByLabel('No approval: deploy group after group').check();
      await Promise.all([page.waitForURL(/\/workflows\//), page.getByRole('button', { name: 'Apply fleet rollback' }).click()]);
      const W = new URL(page.url()).pathname.split('/').at(-1)!;
      const wf = getWorkflow(svc.server.ctx.db, W)!;
      expect(wf.type).toBe('app_rollback');
      expect(verificationsOf(wf.params)).toEqual([
        expect.objectContaining({
          url: `${rcv.hook('form')}?token=hidden`,
          secret: 'whsec_c2VjcmV0IG9mIHRoZSBmb3JtIHRlc3Q=',
          interval: '20s',
        }),
        expect.objectContaining({ url: rcv.hook('form2'), secret: 'whsec_c2VjcmV0IG9mIHRoZSBmb3JtIHRlc3Q=', interval: '20s' }),
      ]);
      await expect(page.locator('dl.facts').first().textContent()).resolves.toContain(`${rcv.hook('form')} (every 20s`);
      // asked, signed with the secret
      await waitFor(() => rcv.at('form').length >= 1 && rcv.at('form2').length >= 1, 15_000, 'the verification requests');
      expect(rcv.at('form')[0].headers['webhook-signature']).toMatch(/^v1,/);
      expect(rcv.at('form2')[0].headers['webhook-signature']).toMatch(/^v1,/);
      expect((await waitWf(api, W)).status).toBe('succeeded');
      expect((await get(api, `/v1/installs/${x.install_id}`)).app_config_id).toBe(v1.app_config_id);
      expect(await page.content()).not.toContain('whsec_');
    } finally {
      await rcv.close();
    }
  });
});
