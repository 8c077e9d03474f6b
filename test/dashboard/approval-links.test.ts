// One-time approval links (CONTRACT 10.4) on a ManualClock: POST …/approval-links (admin, 400s for
// a bad expires_in or token), the link's page without sign-in (the plan, the token it answers as,
// nothing else of the org), CSRF, refused for another step, after expiry and after use (410), the
// response recorded as the link's token and audited "via link"; only a hash of the secret is stored.
// The page is driven once in Chromium: it shows the plan and approves.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser } from 'playwright-core';
import { openDb } from '../../store/db.ts';
import { startService, waitFor, type ApiClient, type OrgCreds, type TestService } from '../helpers/service.ts';
import { ManualClock } from '../helpers/clock.ts';
import { expectAccessible, launchBrowser, newContext } from '../helpers/browser.ts';
import { get, post, waitWf } from '../helpers/workflows.ts';

type Json = any;

const clock = new ManualClock(Date.now());
let svc: TestService;
let browser: Browser;
let org: OrgCreds;
let admin: ApiClient;
const tok: Record<string, OrgCreds & { token_id: string }> = {};
let runId: string;
let steps: Json[];

const awaiting = async () =>
  waitFor(
    async () => (await get(admin, `/v1/workflows/${runId}`)).steps.find((s: Json) => s.status === 'awaiting_approval') ?? null,
    10_000,
    'a plan to await approval',
  );

beforeAll(async () => {
  [svc, browser] = await Promise.all([startService({}, { clock }), launchBrowser()]);
  org = svc.createOrg('links');
  admin = svc.api(org);
  tok.sreA = svc.createToken(org, 'deploy', 'sre-a');
  tok.sreB = svc.createToken(org, 'deploy', 'sre-b');
  tok.reader = svc.createToken(org, 'read', 'reader');
  const appId = (await post(admin, '/v1/apps', { name: 'shop' })).app_id;
  await post(admin, `/v1/apps/${appId}/configs`, { components: [{ name: 'api' }] });
  const ids: string[] = [];
  for (const name of ['eu-1', 'eu-2']) {
    const install = await post(admin, '/v1/installs', { app_id: appId, name });
    ids.push(install.install_id);
    const wfs = await waitFor(
      async () => {
        const l = await get(admin, `/v1/installs/${install.install_id}/workflows`);
        return l.length ? l : null;
      },
      10_000,
      'the provision workflow',
    );
    await waitWf(admin, wfs[0].workflow_id);
  }
  const put = await admin.raw('PUT', `/v1/apps/${appId}/approval-policy`, {
    body: JSON.stringify({ rules: [{ name: 'sre', required: 1, approvers: { token_names: ['sre-a', 'sre-b'] } }] }),
    headers: { 'content-type': 'application/json' },
  });
  expect(put.status).toBe(200);
  const v2 = await post(admin, `/v1/apps/${appId}/configs`, { components: [{ name: 'api', values: { image: 'api:2' } }] });
  const branch = await post(admin, `/v1/apps/${appId}/branches`, {
    name: 'main',
    install_groups: [
      { name: 'ring-0', install_ids: [ids[0]] },
      { name: 'ring-1', install_ids: [ids[1]] },
    ],
  });
  runId = (
    await post(admin, `/v1/apps/${appId}/branches/${branch.app_branch_id}/runs`, { app_config_id: v2.app_config_id, skip_builds: true })
  ).workflow_id;
  await awaiting();
  steps = (await get(admin, `/v1/workflows/${runId}`)).steps;
});
afterAll(async () => {
  await browser?.close();
  await svc?.stop();
});

const stepNamed = (name: string) => steps.find((s: Json) => s.name === name);
const linkFor = async (stepId: string, body: unknown, api = admin) =>
  api.post(`/v1/workflows/${runId}/steps/${stepId}/approval-links`, body);
/** Open a link's page as a browser would: its cookie and the form's CSRF value. */
async function openLink(url: string) {
  const res = await fetch(url, { redirect: 'manual' });
  const html = await res.text();
  const cookie = res.headers
    .getSetCookie()
    .find((c) => c.startsWith('svc_link_csrf='))
    ?.split(';')[0];
  const csrf = /name="csrf" value="([^"]+)"/.exec(html)?.[1];
  return { status: res.status, html, cookie, csrf };
}
const postLink = (url: string, form: Record<string, string>, cookie?: string) =>
  fetch(url, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...(cookie ? { cookie } : {}) },
    body: new URLSearchParams(form),
  });

describe('one-time approval links', () => {
  it('are made by admins only, for a live deploy/admin token, for 1m to 7d', async () => {
    const g0 = stepNamed('plan install group: ring-0');
    expect((await linkFor(g0.step_id, { token_id: tok.sreA.token_id, expires_in: '1h' }, svc.api(tok.sreB))).status).toBe(403);
    const bad = async (body: unknown, needle: RegExp) => {
      const r = await linkFor(g0.step_id, body);
      expect(r.status, r.text).toBe(400);
      expect(r.text).toMatch(needle);
    };
    await bad({ token_id: tok.sreA.token_id, expires_in: '30s' }, /from 1m to 7d/);
    await bad({ token_id: tok.sreA.token_id, expires_in: '8d' }, /from 1m to 7d/);
    await bad({ token_id: 'tok_nope', expires_in: '1h' }, /no live token/);
    await bad({ token_id: tok.reader.token_id, expires_in: '1h' }, /scope read/);
    expect((await linkFor('st_nope', { token_id: tok.sreA.token_id, expires_in: '1h' })).status).toBe(404);
    // a step not awaiting approval
    expect((await linkFor(stepNamed('plan install group: ring-1').step_id, { token_id: tok.sreA.token_id, expires_in: '1h' })).status).toBe(
      409,
    );
  });

  it('a link shows the plan without sign-in, refuses another step and a missing CSRF value, expires, and is good once', async () => {
    const g0 = stepNamed('plan install group: ring-0');
    const made = await linkFor(g0.step_id, { token_id: tok.sreA.token_id, expires_in: '1h' });
    expect(made.status, made.text).toBe(201);
    const url: string = made.body.url;
    expect(url).toMatch(/\/dashboard\/approval-links\/[A-Za-z0-9_-]{43}$/);
    const short = (await linkFor(g0.step_id, { token_id: tok.sreB.token_id, expires_in: '1m' })).body.url;

    const page = await openLink(url);
    expect(page.status).toBe(200);
    expect(page.html).toContain('plan install group: ring-0');
    expect(page.html).toContain('sre-a');
    expect(page.html).toContain('eu-1');
    expect(page.html).toContain('values.image');
    // nothing else of the org: not its id, not its navigation
    expect(page.html).not.toContain(org.org_id);
    expect(page.html).not.toContain('Webhooks');
    expect(page.cookie && page.csrf).toBeTruthy();

    // CSRF: without the cookie's value, refused
    expect((await postLink(url, { response: 'approved', step_id: g0.step_id, csrf: 'x' }, page.cookie)).status).toBe(403);
    expect((await postLink(url, { response: 'approved', step_id: g0.step_id, csrf: page.csrf! })).status).toBe(403);
    // another step: refused, the link stays good
    const other = await postLink(
      url,
      { response: 'approved', step_id: stepNamed('plan install group: ring-1').step_id, csrf: page.csrf! },
      page.cookie,
    );
    expect(other.status).toBe(403);
    expect(await other.text()).toContain('this link answers step plan install group: ring-0 only');

    // expiry on the engine clock
    clock.advance(61_000);
    expect((await openLink(short)).status).toBe(410);

    const done = await postLink(url, { response: 'approved', step_id: g0.step_id, note: 'from chat', csrf: page.csrf! }, page.cookie);
    expect(done.status).toBe(200);
    expect(await done.text()).toContain('Answer recorded');
    const step = (await get(admin, `/v1/workflows/${runId}`)).steps.find((s: Json) => s.step_id === g0.step_id);
    expect(step).toMatchObject({
      status: 'succeeded',
      approval: {
        status: 'approved',
        decided_by_rule: 'sre',
        note: 'from chat',
        responded_by: { token_id: tok.sreA.token_id, token_name: 'sre-a' },
      },
    });
    // used: gone
    expect((await openLink(url)).status).toBe(410);
    expect((await postLink(url, { response: 'approved', step_id: g0.step_id, csrf: page.csrf! }, page.cookie)).status).toBe(410);

    const audit = await get(admin, `/v1/audit?resource_id=${g0.step_id}`);
    expect(audit.data.map((a: Json) => `${a.actor.token_id} ${a.actor.token_name} ${a.action} ${a.status}`)).toEqual([
      `${tok.sreB.token_id} sre-b approval_links.create 403`,
      ...Array(4).fill(expect.stringMatching(/approval_links\.create 400$/)),
      expect.stringMatching(/approval_links\.create 201$/),
      expect.stringMatching(/approval_links\.create 201$/),
      `${tok.sreA.token_id} sre-a (via link) steps.approve 403`,
      `${tok.sreA.token_id} sre-a (via link) steps.approve 200`,
    ]);
    // only a hash of the secret is kept
    const db = openDb(svc.db);
    try {
      const secret = url.split('/').at(-1)!;
      const rows = db.prepare('SELECT * FROM approval_links').all();
      expect(rows.length).toBeGreaterThan(0);
      expect(JSON.stringify(rows)).not.toContain(secret);
    } finally {
      db.close();
    }
  });

  it('in Chromium: the page shows the plan and approves the next group', async () => {
    const g1 = await awaiting();
    expect(g1.name).toBe('plan install group: ring-1');
    const { url } = (await linkFor(g1.step_id, { token_id: tok.sreB.token_id, expires_in: '10m' })).body;
    const context = await newContext(browser);
    try {
      const page = await context.newPage();
      await page.goto(url);
      await page.getByRole('heading', { name: 'plan install group: ring-1' }).waitFor();
      expect(await page.textContent('body')).toContain('eu-2');
      await expectAccessible(page, 'approval link');
      await Promise.all([page.waitForLoadState('load'), page.getByRole('button', { name: 'Approve' }).click()]);
      await page.getByRole('heading', { name: 'Answer recorded' }).waitFor();
    } finally {
      await context.close();
    }
    const step = (await get(admin, `/v1/workflows/${runId}`)).steps.find((s: Json) => s.step_id === g1.step_id);
    expect(step.approval).toMatchObject({ status: 'approved', responded_by: { token_name: 'sre-b' } });
  });
});
