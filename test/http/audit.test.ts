// The audit log and actors (CONTRACT 2 "Scopes and actors"): after a webhook create, a fleet
// rollback and an approval by three tokens, GET /v1/audit lists each with its actor, action,
// resource id and status; a refused write is listed; a distinctive secret appears nowhere in it
// (nor in the table); another org's never shows; filters and cursors; the approval response event
// carries responded_by; `svc audit list`; retention on the engine clock.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import Database from 'better-sqlite3';
import { startService, waitFor, type ApiClient, type OrgCreds, type TestService } from '../helpers/service.ts';
import { startReceiver, type Receiver } from '../helpers/receiver.ts';
import { ManualClock } from '../helpers/clock.ts';
import { get, post, waitStep, waitWf } from '../helpers/workflows.ts';
import { runCli } from '../helpers/cli.ts';

type Json = any;

const SECRET = 'hush-7f3a9c-DISTINCTIVE-secret-value';

let svc: TestService;
let receiver: Receiver;
let org: OrgCreds;
let admin: ApiClient;
let hooks: OrgCreds & { token_id: string };
let deployer: OrgCreds & { token_id: string };
let oncall: OrgCreds & { token_id: string };
let reader: OrgCreds & { token_id: string };
let webhookId: string;
let run: { run_id: string; workflow_id: string };
let approvedStep: string;

/** Every page of the audit log (with `query`), as the admin token reads it. */
async function auditAll(api: ApiClient, query = ''): Promise<Json[]> {
  const out: Json[] = [];
  let after: string | null = null;
  do {
    const r: { status: number; text: string; body: Json } = await api.get(`/v1/audit?limit=2${query}${after ? `&after=${after}` : ''}`);
    expect(r.status, r.text).toBe(200);
    out.push(...r.body.data);
    after = r.body.next_cursor;
  } while (after);
  return out;
}

beforeAll(async () => {
  receiver = await startReceiver();
  svc = await startService();
  org = svc.createOrg('audited');
  admin = svc.api(org);
  hooks = svc.createToken(org, 'webhooks', 'ci-hooks');
  deployer = svc.createToken(org, 'deploy', 'ci-deploy');
  oncall = svc.createToken(org, 'deploy', 'oncall');
  reader = svc.createToken(org, 'read', 'status-page');

  // the webhook, by the webhooks token, with a secret that must appear nowhere in the log
  webhookId = (await post(svc.api(hooks), '/v1/orgs/current/webhooks', { webhook_url: receiver.hook('all'), secret: SECRET })).webhook_id;

  // an install on v2 with v1 before it, so that a fleet rollback to `previous` has somewhere to go
  const D = svc.api(deployer);
  const app = await post(D, '/v1/apps', { name: 'shop' });
  const v1 = await post(D, `/v1/apps/${app.app_id}/configs`, { components: [{ name: 'api', values: { v: 1 } }] });
  const install = await post(D, '/v1/installs', { app_id: app.app_id, name: 'eu-1', app_config_id: v1.app_config_id });
  const provision = await waitFor(async () => (await get(D, `/v1/installs/${install.install_id}/workflows`))[0], 10_000, 'provision');
  await waitWf(D, provision.workflow_id);
  const v2 = await post(D, `/v1/apps/${app.app_id}/configs`, { components: [{ name: 'api', values: { v: 2 } }] });
  const upd = await post(D, `/v1/installs/${install.install_id}/app-config-updates`, { app_config_id: v2.app_config_id });
  await waitWf(D, upd.workflow_id);
  // the fleet rollback, by the deploy token; its plan step approved by another token
  run = await post(D, `/v1/apps/${app.app_id}/rollbacks`, { to: 'previous' });
  const { step } = await waitStep(D, run.workflow_id, 'plan install group: other', 'awaiting_approval');
  approvedStep = step.step_id;
  await post(svc.api(oncall), `/v1/workflows/${run.workflow_id}/steps/${approvedStep}/approval`, { response: 'approved', note: 'go' }, 200);
  await waitWf(D, run.workflow_id);

  // refused writes: a read token deleting the webhook, the deploy token creating one, a 404, a 400
  expect((await svc.api(reader).del(`/v1/orgs/current/webhooks/${webhookId}`)).status).toBe(403);
  expect((await D.post('/v1/orgs/current/webhooks', { webhook_url: receiver.hook('x'), secret: SECRET })).status).toBe(403);
  expect((await svc.api(hooks).patch('/v1/orgs/current/webhooks/wh_nope', { secret: SECRET })).status).toBe(404);
  expect((await svc.api(hooks).post('/v1/orgs/current/webhooks', { webhook_url: 'not a url', secret: SECRET })).status).toBe(400);
}, 60_000);

afterAll(async () => {
  await svc?.stop();
  await receiver?.close();
});

describe('GET /v1/audit', () => {
  it('lists the webhook create, the fleet rollback and the approval, each with its actor, action, resource id and status', async () => {
    const log = await auditAll(admin);
    const find = (action: string, tokenId: string) => log.find((e) => e.action === action && e.actor.token_id === tokenId);
    expect(find('webhooks.create', hooks.token_id)).toMatchObject({
      actor: { token_id: hooks.token_id, token_name: 'ci-hooks' },
      resource_type: 'webhook',
      resource_id: webhookId,
      status: 201,
    });
    expect(find('rollbacks.create', deployer.token_id)).toMatchObject({
      actor: { token_name: 'ci-deploy' },
      resource_type: 'rollback',
      resource_id: run.run_id,
      status: 201,
    });
    expect(find('steps.approve', oncall.token_id)).toMatchObject({
      actor: { token_name: 'oncall' },
      resource_type: 'step',
      resource_id: approvedStep,
      status: 200,
    });
    for (const e of log) {
      expect(Object.keys(e).sort()).toEqual(['action', 'actor', 'at', 'id', 'resource_id', 'resource_type', 'status']);
      expect(Date.parse(e.at)).not.toBeNaN();
    }
    // oldest first
    const ats = log.map((e) => Date.parse(e.at));
    expect([...ats].sort((a, b) => a - b)).toEqual(ats);
  });

  it('keeps refused writes, with the status answered', async () => {
    const log = await auditAll(admin);
    expect(log).toContainEqual(
      expect.objectContaining({
        action: 'webhooks.delete',
        actor: { token_id: reader.token_id, token_name: 'status-page' },
        resource_id: webhookId,
        status: 403,
      }),
    );
    expect(log).toContainEqual(
      expect.objectContaining({ action: 'webhooks.create', actor: expect.objectContaining({ token_id: deployer.token_id }), status: 403 }),
    );
    expect(log).toContainEqual(expect.objectContaining({ action: 'webhooks.update', resource_id: 'wh_nope', status: 404 }));
    expect(log).toContainEqual(
      expect.objectContaining({ action: 'webhooks.create', actor: expect.objectContaining({ token_id: hooks.token_id }), status: 400 }),
    );
  });

  it('a distinctive webhook secret appears nowhere: not in the log, not in its table', async () => {
    const r = await admin.get('/v1/audit?limit=500');
    expect(r.text).not.toContain(SECRET);
    expect(r.text).not.toContain(org.api_token);
    const db = new Database(svc.db, { readonly: true });
    try {
      const dump = JSON.stringify(db.prepare('SELECT * FROM audit_log').all());
      expect(dump).not.toContain(SECRET);
      expect(dump).not.toContain('hush');
      for (const t of [hooks, deployer, oncall, reader]) expect(dump).not.toContain(t.api_token);
    } finally {
      db.close();
    }
  });

  it('filters by actor, action, resource id and time; pages with an opaque cursor', async () => {
    const mine = await auditAll(admin, `&actor=${oncall.token_id}`);
    expect(mine.length).toBeGreaterThan(0);
    expect(mine.every((e) => e.actor.token_id === oncall.token_id)).toBe(true);
    const creates = await auditAll(admin, '&action=webhooks.create');
    expect(creates.map((e) => e.status).sort()).toEqual([201, 400, 403]);
    const about = await auditAll(admin, `&resource_id=${webhookId}`);
    expect(about.map((e) => e.action).sort()).toEqual(['webhooks.create', 'webhooks.delete']);
    expect(await auditAll(admin, '&since=2000-01-01T00:00:00Z&until=2000-01-02T00:00:00Z')).toEqual([]);
    const all = await auditAll(admin);
    expect((await auditAll(admin, '&since=1h')).length).toBe(all.length);
    expect(new Set(all.map((e) => e.id)).size).toBe(all.length);
    const page = await admin.get('/v1/audit?limit=1');
    expect(page.body.next_cursor).toMatch(/^[A-Za-z0-9_-]{22}$/);
    expect((await admin.get('/v1/audit?after=12')).status).toBe(400);
  });

  it("another org's audit never shows, nor its cursors", async () => {
    const other = svc.createOrg('other');
    const B = svc.api(other);
    await post(B, '/v1/orgs/current/webhooks', { webhook_url: receiver.hook('b') });
    const bLog = await auditAll(B);
    expect(bLog.map((e) => e.action)).toEqual(['webhooks.create']);
    const aLog = await auditAll(admin);
    expect(aLog.some((e) => bLog.some((b) => b.id === e.id))).toBe(false);
    const aCursor = (await admin.get('/v1/audit?limit=1')).body.next_cursor;
    expect((await B.get(`/v1/audit?after=${aCursor}`)).status).toBe(400);
    // a token used against another org: refused, and kept in the token's own org only
    expect(
      (
        await svc
          .api({ org_id: other.org_id, api_token: hooks.api_token })
          .post('/v1/orgs/current/webhooks', { webhook_url: receiver.hook('c') })
      ).status,
    ).toBe(403);
    expect((await auditAll(B)).length).toBe(1);
    expect(await auditAll(admin)).toContainEqual(
      expect.objectContaining({ action: 'webhooks.create', actor: expect.objectContaining({ token_id: hooks.token_id }), status: 403 }),
    );
  });

  it('a plan_only answer changes nothing and is not kept (a read); a refused one is', async () => {
    const before = (await auditAll(admin)).length;
    const appId = (await auditAll(admin, '&action=apps.create'))[0].resource_id;
    expect((await svc.api(deployer).post(`/v1/apps/${appId}/rollbacks`, { to: 'previous', plan_only: true })).status).toBe(200);
    expect((await auditAll(admin)).length).toBe(before);
    expect((await svc.api(deployer).post(`/v1/apps/${appId}/rollbacks`, { to: 'cfg_nope', plan_only: true })).status).toBe(404);
    expect((await auditAll(admin)).slice(before)).toEqual([
      expect.objectContaining({ action: 'rollbacks.create', resource_id: appId, status: 404 }),
    ]);
  });

  it('only admin reads it: deploy, webhooks and read tokens get 403 naming admin', async () => {
    for (const t of [deployer, hooks, reader]) {
      const r = await svc.api(t).get('/v1/audit');
      expect(r.status).toBe(403);
      expect(r.body.message).toMatch(/scope admin/);
    }
  });
});

describe('actors on events', () => {
  it('the approval response event carries responded_by (the token id and name, never the token); GET workflow shows it', async () => {
    await svc.settled();
    const events = await svc.events(org.org_id);
    const approved = events.find(
      (e) => e.type === 'com.svc.workflow_step.approval.v1' && e.data.transition === 'approved' && e.data.step.id === approvedStep,
    );
    expect(approved.data.approval.responded_by).toEqual({ token_id: oncall.token_id, token_name: 'oncall' });
    expect(JSON.stringify(events)).not.toContain(oncall.api_token);
    const wf = await get(admin, `/v1/workflows/${run.workflow_id}`);
    expect(wf.steps.find((s: Json) => s.step_id === approvedStep).approval.responded_by).toEqual({
      token_id: oncall.token_id,
      token_name: 'oncall',
    });
    // and the receiver got it as delivered
    await waitFor(
      () => receiver.at('all').some((d) => d.json?.id === approved.id && d.json.data.approval.responded_by?.token_name === 'oncall'),
      5000,
      'the approval response delivered',
    );
  });
});

describe('svc audit list, and the database commands', () => {
  it('lists the log (--actor filters); svc tokens create is kept with actor local and no status', async () => {
    const env = { SVC_API_URL: svc.url, SVC_API_TOKEN: org.api_token, SVC_ORG_ID: org.org_id };
    const made = await runCli(['tokens', 'create', '--org', org.org_id, '--scope', 'read', '--name', 'made-locally', '--db', svc.db]);
    expect(made.code).toBe(0);
    const all = await runCli(['audit', 'list', '--json'], env);
    expect(all.code, all.stderr).toBe(0);
    expect(all.json).toContainEqual(
      expect.objectContaining({
        action: 'tokens.create',
        actor: { token_id: null, token_name: 'local' },
        resource_id: made.json.token_id,
        status: null,
      }),
    );
    const byActor = await runCli(['audit', 'list', '--json', '--actor', oncall.token_id], env);
    expect(byActor.json.length).toBeGreaterThan(0);
    expect(byActor.json.every((e: Json) => e.actor.token_id === oncall.token_id)).toBe(true);
    const table = await runCli(['audit', 'list', '--since', '1h'], env);
    expect(table.stdout).toMatch(/steps\.approve/);
    expect(table.stdout).toMatch(/oncall/);
    // newest first, as the CLI prints every list of events and audit rows; --oldest-first is the API's order (CONTRACT 7)
    const api = (await get(admin, '/v1/audit?limit=500')).data.map((e: Json) => e.id);
    expect(api.length).toBeGreaterThan(2);
    expect(all.json.map((e: Json) => e.id)).toEqual([...api].reverse());
    const oldest = await runCli(['audit', 'list', '--json', '--oldest-first'], env);
    expect(oldest.json.map((e: Json) => e.id)).toEqual(api);
    const lines = table.stdout.split('\n');
    expect(lines.findIndex((l) => l.includes('tokens.create') && l.includes('local'))).toBeLessThan(
      lines.findIndex((l) => l.includes('steps.approve')),
    );
    const denied = await runCli(['audit', 'list'], { ...env, SVC_API_TOKEN: deployer.api_token });
    expect(denied.code).toBe(1);
    expect(denied.stderr).toMatch(/scope admin/);
  });
});

describe('--audit-retention', () => {
  it('rows older than the retention on the engine clock are gone (read at once, pruned soon after)', async () => {
    const clock = new ManualClock(Date.now());
    const s = await startService({ auditRetentionMs: 60_000 }, { clock });
    try {
      const o = s.createOrg('kept');
      const A = s.api(o);
      await post(A, '/v1/apps', { name: 'old' });
      expect((await get(A, '/v1/audit')).data.map((e: Json) => e.action)).toEqual(['apps.create']);
      clock.advance(61_000);
      await post(A, '/v1/apps', { name: 'new' });
      expect((await get(A, '/v1/audit')).data.map((e: Json) => e.action)).toEqual(['apps.create']);
      clock.advance(1_000); // the prune runs every 60th of the retention (at least every second)
      await waitFor(
        () => {
          const db = new Database(s.db, { readonly: true });
          try {
            return (db.prepare('SELECT COUNT(*) AS n FROM audit_log').get() as { n: number }).n === 1;
          } finally {
            db.close();
          }
        },
        5000,
        'the old row pruned',
      );
    } finally {
      await s.stop();
    }
  });
});
