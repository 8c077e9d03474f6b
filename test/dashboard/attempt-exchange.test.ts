// "Why did my receiver answer 400?" answered from svc (issue 56 item 7, CONTRACT 4.5): a receiver
// answers 400 with a JSON body and a header of its own; the attempt list with
// ?include=request,response, `svc webhooks attempts ID --show` and the webhook's page in headless
// Chromium show the status, the header and the body (escaped), and the request headers svc sent
// with their signatures cut to 8 characters. Without include the attempt's shape is as before.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { startService, waitFor, type ApiClient, type OrgCreds, type TestService } from '../helpers/service.ts';
import { expectAccessible, launchBrowser, screenshot, signedInPage } from '../helpers/browser.ts';
import { runCli } from '../helpers/cli.ts';
import { get, post, waitWf } from '../helpers/workflows.ts';

type Json = any;

const HOOKS = '/v1/orgs/current/webhooks';
const SECRET = `whsec_${Buffer.from('attempt-exchange-secret-0123456789').toString('base64')}`;
const BAD_BODY = JSON.stringify({ error: 'install_id is required', hint: '<script>alert(1)</script>' });

describe('attempts keep what a receiver said', () => {
  let svc: TestService;
  let receiver: http.Server;
  let rxUrl: string;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let org: OrgCreds;
  let api: ApiClient;
  let hook: string;

  beforeAll(async () => {
    receiver = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        res.writeHead(400, { 'content-type': 'application/json', 'x-receiver-reason': 'schema-v2-mismatch' });
        res.end(BAD_BODY);
      });
    });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
    rxUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks/bad`;
    [svc, browser] = await Promise.all([startService(), launchBrowser()]);
    org = svc.createOrg('exchange');
    api = svc.api(org);
    hook = (await post(api, HOOKS, { webhook_url: rxUrl, secret: SECRET })).webhook_id;
    const appId = (await post(api, '/v1/apps', { name: 'shop' })).app_id;
    await post(api, `/v1/apps/${appId}/configs`, { components: [{ name: 'api' }] });
    const inst = await post(api, '/v1/installs', { app_id: appId, name: 'eu-1' });
    const wfs = await get(api, `/v1/installs/${inst.install_id}/workflows`);
    expect((await waitWf(api, wfs[0].workflow_id)).status).toBe('succeeded');
    await svc.settled(20_000);
    ({ context, page } = await signedInPage(browser, `${svc.url}/dashboard`, org));
  }, 60_000);

  afterAll(async () => {
    await context?.close();
    await browser?.close();
    await svc?.stop();
    await new Promise((r) => receiver?.close(r));
  });

  it('the attempt list shows request and response with ?include=request,response, and not without', async () => {
    const list: Json[] = await waitFor(
      async () => {
        const d = (await get(api, `${HOOKS}/${hook}/attempts?include=request,response`)).data;
        return d.length ? d : undefined;
      },
      10_000,
      'attempts in the log',
    );
    const a = list[0];
    expect(a.status_code).toBe(400);
    expect(a.response).toMatchObject({ status: 400, body: BAD_BODY, body_truncated: false });
    expect(a.response.headers['x-receiver-reason']).toBe('schema-v2-mismatch');
    expect(a.request.headers['webhook-id']).toBe(a.event_id);
    expect(a.request.headers['webhook-signature']).toMatch(/^v1,.{8}$/);
    expect(JSON.stringify(list)).not.toContain(SECRET);

    const plain = (await get(api, `${HOOKS}/${hook}/attempts`)).data[0];
    expect(Object.keys(plain).sort()).toEqual([
      'attempted_at',
      'duration_ms',
      'error',
      'event_id',
      'outcome',
      'recovery_id',
      'status_code',
      'subject',
      'type',
    ]);
    const onlyResponse = (await get(api, `${HOOKS}/${hook}/attempts?include=response`)).data[0];
    expect(onlyResponse.request).toBeUndefined();
    expect(onlyResponse.response.status).toBe(400);
    const bad = await api.get(`${HOOKS}/${hook}/attempts?include=body`);
    expect(bad.status).toBe(400);
    expect(bad.body.error).toBeDefined();
  });

  it('svc webhooks attempts ID --show prints them', async () => {
    const env = { SVC_API_URL: svc.url, SVC_API_TOKEN: org.api_token, SVC_ORG_ID: org.org_id };
    const r = await runCli(['webhooks', 'attempts', hook, '--show'], env);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('response: 400');
    expect(r.stdout).toContain('x-receiver-reason: schema-v2-mismatch');
    expect(r.stdout).toContain(BAD_BODY);
    expect(r.stdout).toMatch(/webhook-signature: v1,.{8}\n/);
    expect(r.stdout).not.toContain(SECRET);
    const json = await runCli(['webhooks', 'attempts', hook, '--show', '--json'], env);
    expect(json.json[0].response.status).toBe(400);
  });

  it("the webhook page's attempt view shows the 400 body, the header and the request headers, escaped", async () => {
    await page.goto(`${svc.url}/dashboard/${org.org_id}/webhooks/${hook}`);
    const first = page.locator('#attempts-table tbody tr.attempt').first();
    await first.locator('details.attempt-exchange summary').click();
    const details = first.locator('details.attempt-exchange');
    await expect.poll(() => details.locator('.response-status').textContent()).toBe('400');
    expect(await details.getByLabel('Response body').textContent()).toBe(BAD_BODY);
    expect(await details.getByLabel('Response headers').textContent()).toContain('x-receiver-reason: schema-v2-mismatch');
    expect(await details.getByLabel('Request headers').textContent()).toMatch(/webhook-signature: v1,.{8}(\n|$)/);
    // the receiver's markup is text, not elements
    expect(await page.locator('details.attempt-exchange script').count()).toBe(0);
    await screenshot(page, 'attempt-exchange');
    await page.locator('#attempts').screenshot({ path: '/tmp/attempt-exchange.png' });
    await expectAccessible(page, 'webhook page with an attempt opened');
  });
});
