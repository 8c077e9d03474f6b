// The dashboard's side of issue 19 (CONTRACT 4.3, 7), driven in headless Chromium (every page
// checked by axe-core): vetoing a config from the app page, rolling back a fleet from it (plan,
// then apply) onto the rollout's page, and a health gate's bake and trip as that page shows them.
// A real svc in process on a ManualClock (advanced through the bakes), health verdicts published
// on the ingest subject like a health checker (CONTRACT 5.2).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { ManualClock } from '../helpers/clock.ts';
import { startService, waitFor, type ApiClient, type OrgCreds, type TestService } from '../helpers/service.ts';
import { expectAccessible, launchBrowser, screenshot, signedInPage } from '../helpers/browser.ts';
import {
  appWithThreeConfigs,
  get,
  installWith as installWithHistory,
  post,
  waitStep,
  waitWf,
  healthVerdict,
} from '../helpers/workflows.ts';
import { dashboardSession } from '../helpers/dashboard.ts';
import { rid } from '../helpers/ids.ts';
import { startReceiver } from '../helpers/receiver.ts';

type Json = any;

const cfg = (image: string) => ({
  sandbox: { size: 'small' },
  components: [
    { name: 'api', values: { image } },
    { name: 'worker', values: { image: 'worker:1' } },
  ],
});
const MIN = 60_000;

let svc: TestService;
let org: OrgCreds;
let api: ApiClient;
let browser: Browser;
let context: BrowserContext;
let page: Page;
let dash: string;
const clock = new ManualClock(Date.parse('2026-04-01T00:00:00.000Z'));

beforeAll(async () => {
  [svc, browser] = await Promise.all([startService({}, { clock }), launchBrowser()]);
  org = svc.createOrg('dash-rollouts');
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

/** The app's page, reached from the navigation as a user would. */
async function openApp(name: string): Promise<void> {
  await page.goto(`${dash}/${org.org_id}`);
  await Promise.all([page.waitForURL(/\/apps$/), page.getByRole('link', { name: 'Apps', exact: true }).click()]);
  await Promise.all([page.waitForURL(/\/apps\/app_/), page.getByRole('link', { name, exact: true }).click()]);
}

const section = (heading: string | RegExp) => page.locator('section').filter({ has: page.getByRole('heading', { name: heading }) });

describe('the app page', () => {
  it('vetoes a config with a reason: shown as vetoed, the install rollback to it is refused with the reason, lifting the veto allows it', {
    timeout: 90_000,
  }, async () => {
    const { app, v1, v2 } = await app3();
    const inst = await installWith(app.app_id, v1.app_config_id, {}, [v2.app_config_id]);

    await openApp(app.name);
    await expect(page.title()).resolves.toBe(`${app.name} · svc`);
    await page.getByLabel('Reason for vetoing config v1').fill('api:1 leaks memory');
    await Promise.all([
      page.waitForURL((u) => u.pathname.endsWith(`/apps/${app.app_id}`)),
      page.getByRole('button', { name: 'Veto config v1' }).click(),
    ]);
    await expect(page.locator('.flash.ok').textContent()).resolves.toContain('Config v1 vetoed');
    const row = page.locator(`#config-${v1.app_config_id}`);
    await expect(row.locator('.vetoed').textContent()).resolves.toContain('api:1 leaks memory');
    await expect(page.locator(`#config-${v2.app_config_id} .vetoed`).count()).resolves.toBe(0);
    // the fleet as a chart: one bar per config version, newest first, the vetoed one marked
    await expect(page.locator('#config-versions-chart').getAttribute('aria-label')).resolves.toBe(
      'Installs per config version: v3: 0, v2: 1, v1: 0 (vetoed)',
    );
    await expect(page.locator('#config-versions-chart .version-bar').count()).resolves.toBe(1);
    await screenshot(page, 'app-vetoed');
    await expectAccessible(page, 'app page with a vetoed config');
    const configs = await get(api, `/v1/apps/${app.app_id}/configs`);
    expect(configs.map((c: Json) => [c.version, c.vetoed?.reason ?? null])).toEqual([
      [3, null],
      [2, null],
      [1, 'api:1 leaks memory'],
    ]);

    // an empty reason is refused and changes nothing
    await page.getByLabel('Reason for vetoing config v2').evaluate((el) => el.removeAttribute('required'));
    await page.getByRole('button', { name: 'Veto config v2' }).click();
    await expect(page.locator('.flash.error').textContent()).resolves.toContain('reason');
    expect((await get(api, `/v1/apps/${app.app_id}/configs`)).find((c: Json) => c.version === 2).vetoed).toBeNull();

    // a fleet rollback onto it: the plan marks it; applying is refused with the reason, nothing starts
    await Promise.all([page.waitForURL(/\/rollback\?/), page.getByRole('button', { name: 'Plan fleet rollback' }).click()]);
    await expect(page.getByRole('alert').textContent()).resolves.toContain('config v1: api:1 leaks memory');
    await expect(page.locator('li.plan-install .badge').textContent()).resolves.toBe('vetoed');
    await page.getByRole('button', { name: 'Apply fleet rollback' }).click();
    await expect(page.locator('.flash.error').textContent()).resolves.toContain('api:1 leaks memory');
    await expectAccessible(page, 'fleet rollback refused: vetoed');
    expect((await get(api, `/v1/installs/${inst.install_id}/workflows`)).map((w: Json) => w.type)).toEqual([
      'app_config_update',
      'provision',
    ]);

    // the install's rollback to v1: the plan says it is vetoed, applying is refused with the reason
    await page.goto(`${dash}/${org.org_id}/installs/${inst.install_id}`);
    await page.getByLabel('Roll back to').selectOption(v1.app_config_id);
    await page.getByRole('button', { name: 'Plan rollback' }).click();
    await expect(page.getByRole('alert').textContent()).resolves.toContain('is vetoed: api:1 leaks memory');
    await expectAccessible(page, 'install rollback plan of a vetoed config');
    await Promise.all([
      page.waitForURL((u) => u.pathname.endsWith(`/installs/${inst.install_id}`)),
      page.getByRole('button', { name: 'Apply rollback' }).click(),
    ]);
    const refused = await page.locator('.flash.error').textContent();
    expect(refused).toContain('Rollback refused');
    expect(refused).toContain('api:1 leaks memory');
    const versions = await get(api, `/v1/installs/${inst.install_id}/app-config-versions`);
    expect(versions.map((v: Json) => v.app_config_id)).toEqual([v2.app_config_id, v1.app_config_id]);
    expect((await get(api, `/v1/installs/${inst.install_id}`)).app_config_id).toBe(v2.app_config_id);

    // lifting the veto: the same rollback applies
    await openApp(app.name);
    await Promise.all([
      page.waitForURL((u) => u.pathname.endsWith(`/apps/${app.app_id}`)),
      page.getByRole('button', { name: 'Lift veto on config v1' }).click(),
    ]);
    await expect(page.locator('.flash.ok').textContent()).resolves.toContain('Veto on config v1 lifted');
    expect((await get(api, `/v1/apps/${app.app_id}/configs`)).find((c: Json) => c.version === 1).vetoed).toBeNull();
    await page.goto(`${dash}/${org.org_id}/installs/${inst.install_id}`);
    await page.getByLabel('Roll back to').selectOption(v1.app_config_id);
    await page.getByRole('button', { name: 'Plan rollback' }).click();
    await Promise.all([page.waitForURL(/\/workflows\//), page.getByRole('button', { name: 'Apply rollback' }).click()]);
    await waitFor(
      async () => (await get(api, `/v1/installs/${inst.install_id}`)).app_config_id === v1.app_config_id,
      15_000,
      'the rollback to v1',
    );
  });

  it('rolls back a fleet: the plan per group with skips and their reasons (nothing changes), a selector narrows it, then apply lands on the rollout page by group', {
    timeout: 120_000,
  }, async () => {
    const { app, v1, v2, v3 } = await app3();
    const a = await installWith(app.app_id, v1.app_config_id, { ring: 'canary' }, [v2.app_config_id]); // back to v1
    const b = await installWith(app.app_id, v3.app_config_id, { ring: 'main' }, [v2.app_config_id]); // back to v3
    const c = await installWith(app.app_id, v2.app_config_id, { ring: 'main' }); // no earlier version: skipped
    await post(api, `/v1/apps/${app.app_id}/branches`, {
      name: 'main',
      install_groups: [
        { name: 'canary', selector: { match_labels: { ring: 'canary' } } },
        { name: 'main', selector: { match_labels: { ring: 'main' } } },
      ],
    });
    const histories = async () => Promise.all([a, b, c].map((i) => get(api, `/v1/installs/${i.install_id}/app-config-versions`)));
    const before = await histories();

    // a bad selector is refused on the app page
    await openApp(app.name);
    await page.getByLabel('Only installs with labels (optional)').fill('ring');
    await Promise.all([
      page.waitForURL((u) => u.pathname.endsWith(`/apps/${app.app_id}`)),
      page.getByRole('button', { name: 'Plan fleet rollback' }).click(),
    ]);
    await expect(page.locator('.flash.error').textContent()).resolves.toContain('selector');

    // the plan: per group, per install; the skipped install with its reason
    await expect(page.getByLabel('Roll back to').inputValue()).resolves.toBe('previous');
    await Promise.all([page.waitForURL(/\/rollback\?/), page.getByRole('button', { name: 'Plan fleet rollback' }).click()]);
    await expect(page.title()).resolves.toBe(`Fleet rollback plan · ${app.name} · svc`);
    const canary = section('Group 1: canary');
    const main = section('Group 2: main');
    await expect(canary.locator('li.plan-install').allTextContents()).resolves.toEqual([
      expect.stringMatching(new RegExp(`${a.name}.*config v2 → config v1`)),
    ]);
    await expect(main.locator('li.plan-install').allTextContents()).resolves.toEqual([
      expect.stringMatching(new RegExp(`${b.name}.*config v2 → config v3`)),
    ]);
    await expect(canary.locator('ul.diff').textContent()).resolves.toContain('"api:2" → "api:1"');
    await expect(section(/^Skipped/).textContent()).resolves.toContain(`${c.name}: no earlier version`);
    await screenshot(page, 'fleet-rollback-plan');
    await expectAccessible(page, 'fleet rollback plan');
    expect(await histories()).toEqual(before);

    // a deny window over the main ring, for rollbacks, covering the clock's day: the plan says main waits, and until when
    const day = ['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat'][new Date(clock.now()).getUTCDay()];
    const freeze = await post(api, `/v1/apps/${app.app_id}/change-windows`, {
      name: 'freeze',
      kind: 'deny',
      days: [day],
      start: '00:00',
      duration: '24h',
      time_zone: 'UTC',
      selector: { match_labels: { ring: 'main' } },
      applies_to: ['rollback'],
    });
    await page.reload();
    await expect(main.locator('.window-wait').textContent()).resolves.toBe(
      `waits for a change window freeze: starts ${new Date(Date.parse('2026-04-02T00:00:00Z')).toISOString().replace('T', ' ').replace('.000Z', 'Z')}`,
    );
    await expect(canary.locator('.window-wait').count()).resolves.toBe(0);
    await screenshot(page, 'fleet-rollback-plan-window');
    await fetch(`${svc.url}/v1/apps/${app.app_id}/change-windows/${freeze.window_id}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${org.api_token}`, 'x-svc-org-id': org.org_id },
    }).then((r) => expect(r.status).toBe(204));

    // a selector narrows it
    await openApp(app.name);
    await page.getByLabel('Only installs with labels (optional)').fill('ring=canary');
    await Promise.all([page.waitForURL(/\/rollback\?/), page.getByRole('button', { name: 'Plan fleet rollback' }).click()]);
    await expect(page.locator('li.plan-install').count()).resolves.toBe(1);
    await expect(section('Group 2: main').count()).resolves.toBe(0);

    // back to every install; a bad bake is shown back on the plan with nothing started
    await page.goBack();
    await page.getByLabel('Only installs with labels (optional)').fill('');
    await Promise.all([page.waitForURL(/\/rollback\?/), page.getByRole('button', { name: 'Plan fleet rollback' }).click()]);
    await page.getByLabel('Bake time after each group deploys').fill('25h');
    await page.getByRole('button', { name: 'Apply fleet rollback' }).click();
    await expect(page.getByRole('alert').first().textContent()).resolves.toContain('health_gate.bake');
    await expect(page.getByLabel('Bake time after each group deploys').inputValue()).resolves.toBe('25h');
    await expectAccessible(page, 'fleet rollback plan with an error');
    expect(await histories()).toEqual(before);

    // apply, approvals per group (the default), no gate
    await page.getByLabel('Bake time after each group deploys').fill('');
    await Promise.all([page.waitForURL(/\/workflows\//), page.getByRole('button', { name: 'Apply fleet rollback' }).click()]);
    await expect(page.locator('.flash.ok').textContent()).resolves.toContain('Fleet rollback started: 2 install(s)');
    const W = new URL(page.url()).pathname.split('/').at(-1)!;
    expect((await get(api, `/v1/workflows/${W}`)).type).toBe('app_rollback');
    await expect(page.locator('h1').textContent()).resolves.toContain('app_rollback');
    await expect(
      section(/^Group 1: canary/)
        .locator('ol.steps > li > p:first-child > strong')
        .allTextContents(),
    ).resolves.toEqual(['0. plan install group: canary', '1. deploy install group: canary']);
    await expect(
      section(/^Group 2: main/)
        .locator('ol.steps > li > p:first-child > strong')
        .allTextContents(),
    ).resolves.toEqual(['2. plan install group: main', '3. deploy install group: main']);
    await expect(
      section(/^Group 1: canary/)
        .locator('h2 .badge')
        .textContent(),
    ).resolves.toBe('awaiting approval');
    await expectAccessible(page, 'rollout page awaiting approval');

    // approve each group where it is shown
    for (const g of ['canary', 'main']) {
      await waitStep(api, W, `plan install group: ${g}`, 'awaiting_approval');
      await page.reload();
      await section(new RegExp(`^Group \\d: ${g}`))
        .getByRole('button', { name: 'Approve' })
        .click();
      // the form posts back to this same page: wait for the page it lands on, not the URL (already
      // matched), or the next reload starts while that navigation is still under way
      await page.locator('.flash.ok', { hasText: `plan install group: ${g}: approved.` }).waitFor();
    }
    expect((await waitWf(api, W)).status).toBe('succeeded');
    await page.reload();
    await expect(
      section(/^Group 1: canary/)
        .locator('h2 .badge')
        .textContent(),
    ).resolves.toBe('succeeded');
    await expect(
      section(/^Group 2: main/)
        .locator('ul.children')
        .textContent(),
    ).resolves.toMatch(new RegExp(`${b.name}: app_config_update\\s*succeeded`));
    await screenshot(page, 'fleet-rollback-done');
    await expectAccessible(page, 'rollout page done');
    expect((await get(api, `/v1/installs/${a.install_id}`)).app_config_id).toBe(v1.app_config_id);
    expect((await get(api, `/v1/installs/${b.install_id}`)).app_config_id).toBe(v3.app_config_id);
    expect(await get(api, `/v1/installs/${c.install_id}/app-config-versions`)).toEqual(before[2]);

    // the app page lists the rollout
    await openApp(app.name);
    await expect(section('Rollouts').getByRole('link', { name: 'fleet rollback' }).getAttribute('href')).resolves.toBe(
      `/dashboard/${org.org_id}/workflows/${W}`,
    );
  });
});

describe('a health-gated rollout page', () => {
  it("shows each bake's time left on the engine clock, then the tripped gate's cause and the groups rolled back", {
    timeout: 120_000,
  }, async () => {
    const { app, v1, v2 } = await app3();
    const x = await installWith(app.app_id, v1.app_config_id, { ring: 'canary' }, [v2.app_config_id]);
    const y = await installWith(app.app_id, v1.app_config_id, { ring: 'main' }, [v2.app_config_id]);
    await post(api, `/v1/apps/${app.app_id}/branches`, {
      name: 'main',
      install_groups: [
        { name: 'canary', install_ids: [x.install_id] },
        { name: 'main', install_ids: [y.install_id] },
      ],
    });

    await openApp(app.name);
    await Promise.all([page.waitForURL(/\/rollback\?/), page.getByRole('button', { name: 'Plan fleet rollback' }).click()]);
    await page.getByLabel('Bake time after each group deploys').fill('10m');
    await page.getByLabel('A bad verdict trips once it has lasted').fill('30s');
    await page.getByLabel('Installs of a group updated at a time').fill('1');
    await page.getByLabel('Failures a group may have (% of its installs)').fill('50');
    await page.getByLabel('degraded').uncheck();
    await page.getByLabel('When the gate trips').selectOption('rollback');
    await page.getByLabel('No approval: deploy group after group').check();
    await Promise.all([page.waitForURL(/\/workflows\//), page.getByRole('button', { name: 'Apply fleet rollback' }).click()]);
    // the running page offers its refresh, switched off in this tab: only the test's reloads move it
    await expect(page.locator('#auto-refresh').isChecked()).resolves.toBe(false);
    const W = new URL(page.url()).pathname.split('/').at(-1)!;
    const wf = await get(api, `/v1/workflows/${W}`);
    expect(wf.steps.map((s: Json) => s.name)).toEqual([
      'deploy install group: canary',
      'bake install group: canary',
      'deploy install group: main',
      'bake install group: main',
    ]);

    // the canary bake: time left moves with the engine's clock, not the wall clock
    await waitStep(api, W, 'bake install group: canary', 'started');
    await page.reload();
    await expect(page.locator('dl.facts').first().textContent()).resolves.toContain(
      'bake 10m after each group deploys; trips on unhealthy that lasts 30s; then rollback',
    );
    await expect(page.locator('dl.facts').first().textContent()).resolves.toContain(
      '1 install(s) of a group at a time; a group fails when more than 50 % of its installs fail',
    );
    // the picture of the run: canary deployed, main waiting
    const picture = page.getByRole('img', { name: /^Installs by group/ });
    await expect(picture.getAttribute('aria-label')).resolves.toBe('Installs by group: canary: 1 succeeded; main: 1 waiting');
    const canaryBake = section(/^Group 1: canary/).locator('.bake-left');
    await expect(canaryBake.textContent()).resolves.toContain('10 min left of 10m');
    await verdict(x, 'api', 'healthy');
    clock.advance(4 * MIN);
    await page.reload();
    await expect(canaryBake.textContent()).resolves.toContain('6 min left of 10m');
    await expect(
      section(/^Group 1: canary/)
        .locator('ul.verdicts')
        .textContent(),
    ).resolves.toContain(x.name);
    await expect(
      section(/^Group 1: canary/)
        .locator('h2 .badge')
        .textContent(),
    ).resolves.toBe('baking');
    await screenshot(page, 'rollout-baking');
    await expectAccessible(page, 'rollout page baking');
    clock.advance(6 * MIN);
    await waitStep(api, W, 'bake install group: main', 'started');
    await page.reload();
    await expect(canaryBake.textContent()).resolves.toContain('Passed');
    await expect(page.locator('#trip').count()).resolves.toBe(0);

    // main turns unhealthy during its bake: the gate trips, both groups roll back
    clock.advance(2 * MIN);
    await verdict(y, 'worker', 'unhealthy', 'crash loop');
    // it trips once it has lasted 30 s on the engine's clock
    clock.advance(29_000);
    await svc.settled();
    expect((await get(api, `/v1/workflows/${W}`)).status).toBe('started');
    clock.advance(1000);
    const done = await waitWf(api, W);
    expect(done.status).toBe('failed');
    await waitFor(
      async () => (await get(api, `/v1/installs/${x.install_id}`)).app_config_id === v2.app_config_id,
      15_000,
      'canary back on v2',
    );
    await page.reload();
    const trip = page.locator('#trip');
    await expect(trip.getByRole('heading').textContent()).resolves.toBe('Health gate tripped');
    const facts = await trip.locator('dd').allTextContents();
    expect(facts[0]).toContain(y.name);
    expect(facts[1]).toContain('worker');
    expect(facts[2]).toBe('unhealthy');
    expect(facts[3]).toBe('crash loop');
    expect(facts[4]).toContain('roll back');
    await expect(
      section(/^Group 2: main/)
        .locator('.bake-left')
        .textContent(),
    ).resolves.toMatch(new RegExp(`Tripped: install ${y.name}, component worker was unhealthy: crash loop`));
    // the verdict that tripped it, in the bake's verdicts, with how long it lasted
    await expect(
      section(/^Group 2: main/)
        .locator('tr.bake-verdict[data-verdict=unhealthy] td')
        .last()
        .textContent(),
    ).resolves.toBe("tripped the gate: bad for 30 s, as long as the gate's for (30 s)");
    await expect(
      section(/^Group 2: main/)
        .locator('ol.steps > li > p:first-child > strong')
        .allTextContents(),
    ).resolves.toEqual(['2. deploy install group: main', '3. bake install group: main', '4. rollback install group: main']);
    await expect(
      section(/^Group 1: canary/)
        .locator('ol.steps > li > p:first-child > strong')
        .last()
        .textContent(),
    ).resolves.toBe('5. rollback install group: canary');
    for (const g of [/^Group 1: canary/, /^Group 2: main/])
      await expect(section(g).locator('h2 .badge').textContent()).resolves.toBe('rolled back');
    await expect(picture.getAttribute('aria-label')).resolves.toBe('Installs by group: canary: 1 rolled back; main: 1 rolled back');
    await screenshot(page, 'rollout-tripped');
    await expectAccessible(page, 'rollout page tripped');
    expect((await get(api, `/v1/installs/${y.install_id}`)).app_config_id).toBe(v2.app_config_id);
  });
});

describe('change windows on the app page', () => {
  it('creates a deny window from the form; a held install shows as waiting for a window in the run picture; deleting the window lets it go; a read session sees no forms and is refused', {
    timeout: 120_000,
  }, async () => {
    const { app, v1, v2 } = await app3();
    const x = await installWith(app.app_id, v1.app_config_id, { tier: 'enterprise' });
    const y = await installWith(app.app_id, v1.app_config_id, { tier: 'free' });
    const branch = await post(api, `/v1/apps/${app.app_id}/branches`, {
      name: 'main',
      install_groups: [{ name: 'all', install_ids: [x.install_id, y.install_id] }],
    });

    await openApp(app.name);
    const windows = section('Change windows');
    await expect(windows.getByText('No change windows').count()).resolves.toBe(1);
    await page.getByLabel('Name').fill('enterprise freeze');
    await page.locator('input[name=kind][value=deny]').check();
    for (const d of ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun']) await page.locator(`input[name=days][value=${d}]`).check();
    await page.getByLabel('Opens at (HH:MM, local)').fill('00:00');
    await page.getByLabel('Open for').fill('24h');
    await page.getByLabel('Time zone').fill('Europe/Berlin');
    await page.getByLabel('Only installs labelled (k=v,…)').fill('tier=enterprise');
    await Promise.all([
      page.waitForURL((u) => u.pathname.endsWith(`/apps/${app.app_id}`)),
      page.getByRole('button', { name: 'Create window' }).click(),
    ]);
    await expect(page.locator('.flash.ok').textContent()).resolves.toContain('Change window enterprise freeze created');
    const [w] = await get(api, `/v1/apps/${app.app_id}/change-windows`);
    expect(w).toMatchObject({
      name: 'enterprise freeze',
      kind: 'deny',
      start: '00:00',
      duration: '24h',
      time_zone: 'Europe/Berlin',
      selector: { match_labels: { tier: 'enterprise' } },
      applies_to: ['branch_run'],
    });
    await expect(section('Change windows').locator('#change-windows tbody tr').first().textContent()).resolves.toContain(
      'labelled tier=enterprise',
    );
    await screenshot(page, 'app-change-windows');
    await page.screenshot({ path: '/tmp/app-change-windows.png', fullPage: true });
    await expectAccessible(page, 'app page with change windows');

    // a bad form changes nothing and says why
    await page.getByLabel('Name').fill('bad');
    await page.locator('input[name=days][value=sun]').check();
    await page.getByLabel('Opens at (HH:MM, local)').fill('01:00');
    await page.getByLabel('Open for').fill('5m');
    await page.getByLabel('Time zone').fill('Mars/Olympus');
    await Promise.all([
      page.waitForURL((u) => u.pathname.endsWith(`/apps/${app.app_id}`)),
      page.getByRole('button', { name: 'Create window' }).click(),
    ]);
    await expect(page.locator('.flash.error').textContent()).resolves.toMatch(/duration.*time_zone|time_zone.*duration/s);
    expect((await get(api, `/v1/apps/${app.app_id}/change-windows`)).length).toBe(1);

    const run = await post(api, `/v1/apps/${app.app_id}/branches/${branch.app_branch_id}/runs`, {
      app_config_id: v2.app_config_id,
      skip_builds: true,
    });
    const W = run.workflow_id;
    const { step } = await waitStep(api, W, 'plan install group: all', 'awaiting_approval');
    await post(api, `/v1/workflows/${W}/steps/${step.step_id}/approval`, { response: 'approved' }, 200);
    await waitStep(api, W, `wait for change window: ${x.name}`, 'started');
    await waitFor(
      async () => (await get(api, `/v1/installs/${y.install_id}`)).app_config_id === v2.app_config_id,
      15_000,
      'the free install on v2',
    );
    const picture = page.locator('.run-picture svg');
    // the free install's config is applied a moment before its deploy step is recorded as succeeded
    await waitFor(
      async () => {
        await page.goto(`${dash}/${org.org_id}/workflows/${W}`);
        return (await picture.getAttribute('aria-label')) === 'Installs by group: all: 1 waiting for window, 1 succeeded';
      },
      15_000,
      'the run picture with the free install succeeded',
    );
    await expect(
      picture.locator('rect', { has: page.locator('title', { hasText: `${x.name}: waiting for window` }) }).getAttribute('fill'),
    ).resolves.toBe('#7c3aed');
    await expect(page.locator('.window-wait').textContent()).resolves.toContain('Held by change window enterprise freeze for 0 s so far'); // by name, not id
    await screenshot(page, 'rollout-window-wait');
    await page.screenshot({ path: '/tmp/rollout-window-wait.png', fullPage: true });
    await expectAccessible(page, 'rollout page with a wait for a window');

    // a read session: no create form, no delete button; a delete posted anyway is 403
    const reader = svc.createToken(org, 'read', 'status-page');
    const rs = await dashboardSession(dash, reader);
    const html = await (await rs.get(`/${org.org_id}/apps/${app.app_id}`)).text();
    expect(html).toContain('Changing change windows needs a token with scope deploy');
    expect(html).not.toContain('change-window-form');
    const del = await rs.submit(`/${org.org_id}/apps/${app.app_id}`, `/${org.org_id}/apps/${app.app_id}/windows/${w.window_id}/delete`, {});
    expect(del.status).toBe(403);
    expect((await get(api, `/v1/apps/${app.app_id}/change-windows`)).length).toBe(1);

    await openApp(app.name);
    await Promise.all([
      page.waitForURL((u) => u.pathname.endsWith(`/apps/${app.app_id}`)),
      page.getByRole('button', { name: 'Delete window enterprise freeze' }).click(),
    ]);
    await expect(page.locator('.flash.ok').textContent()).resolves.toContain('Change window deleted');
    expect((await waitWf(api, W)).status).toBe('succeeded');
    expect((await get(api, `/v1/installs/${x.install_id}`)).app_config_id).toBe(v2.app_config_id);
  });
});

describe('tenancy and CSRF', () => {
  it("another org's app and its forms are 404; a veto without the CSRF token is 403 and changes nothing", { timeout: 60_000 }, async () => {
    const { app, v1 } = await app3();
    const other = svc.createOrg('dash-rollouts-other');
    const theirs = await dashboardSession(dash, other);
    expect((await theirs.get(`/${other.org_id}/apps`)).status).toBe(200);
    expect((await theirs.get(`/${other.org_id}/apps/${app.app_id}`)).status).toBe(404);
    expect((await theirs.get(`/${other.org_id}/apps/${app.app_id}/rollback?to=previous`)).status).toBe(404);
    expect((await theirs.get(`/${org.org_id}/apps/${app.app_id}`)).status).toBe(404);
    const veto = await theirs.submit(`/${other.org_id}/apps`, `/${other.org_id}/apps/${app.app_id}/configs/${v1.app_config_id}/veto`, {
      reason: 'not yours',
    });
    expect(veto.status).toBe(404);
    const session = (await context.cookies()).find((c) => c.name === 'svc_session')!;
    const noCsrf = await fetch(`${dash}/${org.org_id}/apps/${app.app_id}/configs/${v1.app_config_id}/veto`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: `svc_session=${session.value}` },
      body: new URLSearchParams({ reason: 'forged' }),
    });
    expect(noCsrf.status).toBe(403);
    expect((await get(api, `/v1/apps/${app.app_id}/configs`)).every((c: Json) => c.vetoed === null)).toBe(true);
  });
});

describe('a verified rollout page', () => {
  it("shows each verification's last answer per group in the run's picture and under the verify step", { timeout: 120_000 }, async () => {
    const rcv = await startReceiver();
    try {
      const { app, v1, v2 } = await app3();
      const x = await installWith(app.app_id, v1.app_config_id, { ring: 'canary' });
      const y = await installWith(app.app_id, v1.app_config_id, { ring: 'main' });
      const branch = await post(api, `/v1/apps/${app.app_id}/branches`, {
        name: 'main',
        install_groups: [
          { name: 'canary', install_ids: [x.install_id] },
          { name: 'main', install_ids: [y.install_id] },
        ],
      });
      let asked = 0;
      rcv.set('dash-a', { answer: () => (asked++ === 0 ? { status: 202 } : { status: 200, body: '{"verdict":"pass"}' }) });
      rcv.set('dash-b', { answer: () => ({ status: 200, body: '{"verdict":"pass"}' }) });
      const run = await post(api, `/v1/apps/${app.app_id}/branches/${branch.app_branch_id}/runs`, {
        app_config_id: v2.app_config_id,
        skip_builds: true,
        verification: [
          { url: `${rcv.hook('dash-a')}?token=hidden`, secret: 'whsec_c2VjcmV0IG9mIHRoZSBkYXNoYm9hcmQgdGVzdA==', interval: '10s' },
          { url: rcv.hook('dash-b'), interval: '10s' },
        ],
      });
      const W = run.workflow_id;
      const { step } = await waitStep(api, W, 'plan install group: canary', 'awaiting_approval');
      await post(api, `/v1/workflows/${W}/steps/${step.step_id}/approval`, { response: 'approved' }, 200);
      await waitFor(() => rcv.at('dash-a').length === 1 && rcv.at('dash-b').length === 1, 10_000, 'both URLs asked');
      await waitFor(
        async () =>
          (await get(api, `/v1/workflows/${W}`)).steps.some(
            (s: Json) => s.name === 'verify install group: canary' && s.status === 'started',
          ),
        10_000,
        'verify started',
      );
      const picture = page.getByRole('img', { name: /^Installs by group/ });
      const a = `${rcv.hook('dash-a')}`;
      const b = `${rcv.hook('dash-b')}`;
      // both answers recorded (the receiver has answered; the engine writes each answer after it)
      await waitFor(
        async () => {
          await page.goto(`${dash}/${org.org_id}/workflows/${W}`);
          const label = (await picture.getAttribute('aria-label')) ?? '';
          return label.includes(`verification ${a} pending (1 request)`) && label.includes(`verification ${b} pass (1 request)`);
        },
        10_000,
        'both answers on the page',
      );
      await expect(picture.getAttribute('aria-label')).resolves.toBe(
        `Installs by group: canary: 1 succeeded, verification ${a} pending (1 request), verification ${b} pass (1 request); main: 1 waiting`,
      );
      await expect(picture.locator('g.verification text').allTextContents()).resolves.toEqual([
        `${a.replace('http://', '')} pending #1`,
        `${b.replace('http://', '')} pass #1`,
      ]);
      await expect(
        section(/^Group 1: canary/)
          .locator('h2 .badge')
          .textContent(),
      ).resolves.toBe('verifying');
      await expect(
        section(/^Group 1: canary/)
          .locator('ul.verifications')
          .textContent(),
      ).resolves.toContain('next request in 10 s');
      await expect(page.locator('dl.facts').first().textContent()).resolves.toContain(
        `after each group deploys, until each passes: ${a} (every 10s, timeout 10s, at most 1h, 3 failure(s) in a row, signed); ${b} (every 10s`,
      );
      const html = await page.content();
      expect(html).not.toContain('token=hidden'); // the URL's query is never shown
      expect(html).not.toContain('whsec_');
      await screenshot(page, 'rollout-verifying');
      await expectAccessible(page, 'rollout page verifying');

      clock.advance(10_000);
      await waitStep(api, W, 'plan install group: main', 'awaiting_approval');
      await page.reload();
      await expect(picture.getAttribute('aria-label')).resolves.toContain(
        `canary: 1 succeeded, verification ${a} pass (2 requests), verification ${b} pass (1 request); main: 1 waiting`,
      );
      expect(rcv.at('dash-b')).toHaveLength(1); // passed: not asked again
      await screenshot(page, 'rollout-verified');
      await post(api, `/v1/workflows/${W}/cancel`, undefined, 200);
    } finally {
      await rcv.close();
    }
  });
});
