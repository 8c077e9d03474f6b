// Token scopes (CONTRACT 2 "Scopes and actors"): every route of the route table is tried with a
// token of each scope, so that no route escapes: a `read` token gets 200 on every GET (on real
// resources) and 403 naming the needed scope on every write (changing nothing); `webhooks` and
// `deploy` tokens pass exactly the writes of their scope; `admin` passes all. The OpenAPI document
// states each operation's scope.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import Database from 'better-sqlite3';
import { API_ROUTES } from '../../src/http/routes/index.ts';
import { defineRoute, mountRoutes, reply, type ApiRoute } from '../../src/http/api-route.ts';
import { errorResponse, toHttpError } from '../../src/http/http-error.ts';
import type { AuthEnv } from '../../src/http/auth.ts';
import { ConflictError } from '../../src/domain/errors.ts';
import { Hono } from 'hono';
import { z } from 'zod';
import { allows, SCOPES, type Scope } from '../../src/domain/scopes.ts';
import { startService, waitFor, type ApiClient, type OrgCreds, type TestService } from '../helpers/service.ts';
import { startReceiver, type Receiver } from '../helpers/receiver.ts';
import { get, post, waitWf } from '../helpers/workflows.ts';
import { runCli } from '../helpers/cli.ts';

type Json = any;

let svc: TestService;
let receiver: Receiver;
let org: OrgCreds;
let admin: ApiClient;
const clients = {} as Record<Scope, ApiClient>;
/** a real id for every path parameter of the route table */
const ids: Record<string, string> = {};

const authed = API_ROUTES.filter((r) => !r.public);
const reads = authed.filter((r) => r.method === 'get');
const writes = authed.filter((r) => r.method !== 'get');

const pathOf = (r: ApiRoute, values: Record<string, string>) =>
  r.path.replace(/\{(\w+)\}/g, (_, n: string) => encodeURIComponent(values[n] ?? `missing_${n}`));
const call = (api: ApiClient, r: ApiRoute, p: string) =>
  api.raw(r.method.toUpperCase(), p, r.method === 'get' ? {} : { body: '{}', headers: { 'content-type': 'application/json' } });

beforeAll(async () => {
  receiver = await startReceiver();
  svc = await startService();
  org = svc.createOrg('scopes');
  admin = svc.api(org);
  for (const s of SCOPES) clients[s] = svc.api(svc.createToken(org, s));

  // one of everything, made by the admin token (the org's first token, made before any scope was asked for)
  ids.webhook_id = (await post(admin, '/v1/orgs/current/webhooks', { webhook_url: receiver.hook('all') })).webhook_id;
  ids.app_id = (await post(admin, '/v1/apps', { name: 'shop' })).app_id;
  ids.app_config_id = (
    await post(admin, `/v1/apps/${ids.app_id}/configs`, { components: [{ name: 'api' }], actions: [{ name: 'migrate' }] })
  ).app_config_id;
  ids.app_branch_id = (
    await post(admin, `/v1/apps/${ids.app_id}/branches`, {
      name: 'main',
      install_groups: [{ name: 'all', selector: { match_labels: { ring: 'a' } } }],
    })
  ).app_branch_id;
  const policy = await admin.raw('PUT', `/v1/apps/${ids.app_id}/approval-policy`, {
    body: JSON.stringify({ rules: [{ name: 'ops', required: 1, approvers: { scopes: ['admin'] } }] }),
    headers: { 'content-type': 'application/json' },
  });
  expect(policy.status).toBe(200);
  const install = await post(admin, '/v1/installs', { app_id: ids.app_id, name: 'eu-1', labels: { ring: 'a' } });
  ids.install_id = install.install_id;
  const wfs = await waitFor(
    async () => {
      const l = await get(admin, `/v1/installs/${ids.install_id}/workflows`);
      return l.length ? l : null;
    },
    10_000,
    'the provision workflow',
  );
  ids.workflow_id = wfs[0].workflow_id;
  await waitWf(admin, ids.workflow_id);
  const full = await get(admin, `/v1/installs/${ids.install_id}`);
  ids.component_id = full.components[0].component_id;
  ids.action_id = full.actions[0].action_id;
  ids.version_id = (await get(admin, `/v1/installs/${ids.install_id}/app-config-versions`))[0].version_id;
  ids.step_id = (await get(admin, `/v1/workflows/${ids.workflow_id}`)).steps[0].step_id;
  ids.event_id = (await get(admin, '/v1/events')).data[0].id;
  ids.recovery_id = (await post(admin, `/v1/orgs/current/webhooks/${ids.webhook_id}/recover`, { since: '1h' }, 202)).recovery_id;
  await waitFor(
    async () => (await get(admin, `/v1/orgs/current/webhooks/${ids.webhook_id}/recoveries/${ids.recovery_id}`)).state === 'done',
    10_000,
    'the recovery',
  );
  await svc.settled();
}, 60_000);

afterAll(async () => {
  await svc?.stop();
  await receiver?.close();
});

/** What the store holds, to prove a refused write changed nothing. */
function storeState() {
  const db = new Database(svc.db, { readonly: true });
  try {
    const tables = ['webhooks', 'apps', 'app_configs', 'app_branches', 'installs', 'workflows', 'steps', 'recoveries', 'api_tokens'];
    return Object.fromEntries(tables.map((t) => [t, db.prepare(`SELECT * FROM ${t} ORDER BY rowid`).all()]));
  } finally {
    db.close();
  }
}

describe('scopes on every route', () => {
  it('the route table has reads and writes of every scope, and every route names its scope', () => {
    expect(reads.length).toBeGreaterThan(10);
    // admin: the one-time approval links (CONTRACT 10.4)
    expect(new Set(writes.map((r) => r.scope))).toEqual(new Set(['webhooks', 'deploy', 'admin']));
    for (const r of authed) expect(SCOPES, r.operationId).toContain(r.scope);
    for (const r of writes) expect(r.audit?.action, r.operationId).toMatch(/^[a-z_]+\.[a-z_]+$/);
  });

  it('a read token: 200 on every GET but the audit log (on real resources)', async () => {
    for (const r of reads) {
      const res = await call(clients.read, r, pathOf(r, ids));
      if (r.scope === 'admin') {
        expect([r.operationId, res.status]).toEqual([r.operationId, 403]);
        expect(res.body.message).toBe(`GET ${r.path} needs scope admin; this token has scope read`);
      } else expect([r.operationId, res.status, res.text.slice(0, 200)]).toEqual([r.operationId, 200, res.text.slice(0, 200)]);
    }
  });

  it('a read token: 403 on every write, naming the scope it needs, and nothing changes', async () => {
    const before = storeState();
    for (const r of writes) {
      const res = await call(clients.read, r, pathOf(r, ids));
      expect([r.operationId, res.status, res.body?.error]).toEqual([r.operationId, 403, 'forbidden']);
      // the route as a caller writes it and the scope it needs, never the internal operation id (CONTRACT 7)
      expect(res.body.message, r.operationId).toBe(
        `${r.method.toUpperCase()} ${r.path} needs scope ${r.scope === 'admin' ? 'admin' : `${r.scope} or admin`}; this token has scope read`,
      );
      expect(res.body.message, r.operationId).not.toContain(r.operationId);
    }
    expect(storeState()).toEqual(before);
  });

  it('webhooks, deploy and admin tokens: each write passes the scope check exactly when the scope covers it', async () => {
    // made-up ids (404) or an empty body (400): past the scope check, nothing is changed
    const fake = Object.fromEntries(Object.keys(ids).map((k) => [k, `nope_${k}`]));
    for (const s of ['webhooks', 'deploy', 'admin'] as const) {
      for (const r of writes) {
        const res = await call(clients[s], r, pathOf(r, fake));
        const allowed = allows(s, r.scope as Scope);
        if (allowed) expect([s, r.operationId, res.status === 403]).toEqual([s, r.operationId, false]);
        else {
          expect([s, r.operationId, res.status]).toEqual([s, r.operationId, 403]);
          expect(res.body.message).toContain(`scope ${r.scope}`);
        }
      }
    }
  });

  it('webhooks cannot roll back the fleet (403 deploy); deploy cannot create webhooks (403 webhooks)', async () => {
    const rb = await clients.webhooks.post(`/v1/apps/${ids.app_id}/rollbacks`, { to: 'previous', plan_only: true });
    expect(rb.status).toBe(403);
    expect(rb.body.message).toMatch(/scope deploy/);
    const wh = await clients.deploy.post('/v1/orgs/current/webhooks', { webhook_url: receiver.hook('x') });
    expect(wh.status).toBe(403);
    expect(wh.body.message).toBe('POST /v1/orgs/current/webhooks needs scope webhooks or admin; this token has scope deploy');
    // and each can do its own
    expect((await clients.webhooks.post('/v1/orgs/current/webhooks', { webhook_url: receiver.hook('mine') })).status).toBe(201);
    expect((await clients.deploy.post(`/v1/apps/${ids.app_id}/rollbacks`, { to: 'previous', plan_only: true })).status).toBe(200);
  });

  it('a revoked or unknown token is still 401, and another org stays 403 whatever the scope', async () => {
    const other = svc.createOrg('other');
    const r = await svc.api({ org_id: other.org_id, api_token: org.api_token }).get('/v1/apps');
    expect(r.status).toBe(403);
    expect((await svc.api({ org_id: org.org_id, api_token: 'svc_nope' }).get('/v1/apps')).status).toBe(401);
  });
});

describe("OpenAPI states each operation's scope", () => {
  it('security: [{bearer: [scope], org: []}] on every authenticated operation, none on public ones', async () => {
    const doc = (await admin.get('/v1/openapi.json')).body as Json;
    for (const r of API_ROUTES) {
      const op = doc.paths[r.path][r.method];
      if (r.public) expect(op.security, r.operationId).toEqual([]);
      else expect(op.security, r.operationId).toEqual([{ bearer: [r.scope], org: [] }]);
    }
    expect(doc.components.securitySchemes.bearer.description).toMatch(/scope/);
  });
});

describe('svc tokens create --scope', () => {
  it('makes a token of that scope (default admin); an unknown scope is a usage error', async () => {
    const made = await runCli(['tokens', 'create', '--org', org.org_id, '--name', 'ci', '--scope', 'deploy', '--db', svc.db]);
    expect(made.code).toBe(0);
    expect(made.json.scope).toBe('deploy');
    const ci = svc.api({ org_id: org.org_id, api_token: made.json.api_token });
    expect((await ci.get('/v1/apps')).status).toBe(200);
    expect((await ci.del(`/v1/orgs/current/webhooks/${ids.webhook_id}`)).status).toBe(403);
    const dflt = await runCli(['tokens', 'create', '--org', org.org_id, '--db', svc.db]);
    expect(dflt.json.scope).toBe('admin');
    const bad = await runCli(['tokens', 'create', '--org', org.org_id, '--scope', 'root', '--db', svc.db]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/read, webhooks, deploy, admin/);
  });
});

describe('a write route: prepare (I/O first), the change with its row, settle (I/O after)', () => {
  const steps: string[] = [];
  const schema = z.object({ n: z.number() });
  const routes = [
    defineRoute({
      operationId: 'probe',
      method: 'post',
      path: '/v1/probe/{thing_id}',
      tag: 'test',
      scope: 'webhooks',
      audit: { action: 'probes.run', resource: 'thing' },
      summary: 'a write whose change needs an answer from elsewhere first',
      body: { schema: z.strictObject({ fail: z.boolean() }) },
      responses: { 200: { description: 'x', schema } },
      errors: [409],
      prepare: async ({ body }) => {
        steps.push('prepare');
        await new Promise((r) => setImmediate(r)); // an answer from elsewhere: a later turn of the event loop
        if (body.fail) throw new ConflictError('the other side said no');
        return 41;
      },
      handle: ({ prepared }) => {
        steps.push(`handle ${prepared}`);
        return reply.ok({ n: prepared + 1 });
      },
      settle: async (_a, done) => {
        steps.push('settle');
        return done;
      },
    }),
  ];
  let app: Hono<AuthEnv>;
  beforeAll(() => {
    app = new Hono<AuthEnv>();
    app.onError((err, c) => errorResponse(c, toHttpError(err)));
    app.use('*', async (c, next) => {
      c.set('orgId', org.org_id);
      c.set('caller', { org_id: org.org_id, scope: 'webhooks', actor: { token_id: 'tok_probe', token_name: 'probe' } });
      await next();
    });
    mountRoutes(app, svc.server.ctx, routes);
  });

  it('runs prepare, then the change and its audit row, then settle; a refusal in prepare is kept', async () => {
    const ok = await app.request('/probe/th_1', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"fail":false}',
    });
    expect(ok.status).toBe(200);
    expect(await ok.json()).toEqual({ n: 42 });
    expect(steps).toEqual(['prepare', 'handle 41', 'settle']);
    const no = await app.request('/probe/th_2', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"fail":true}' });
    expect(no.status).toBe(409);
    expect(steps).toEqual(['prepare', 'handle 41', 'settle', 'prepare']);
    const rows = (await admin.get('/v1/audit?action=probes.run')).body.data;
    expect(rows.map((e: Json) => [e.resource_id, e.status, e.actor.token_name])).toEqual([
      ['th_1', 200, 'probe'],
      ['th_2', 409, 'probe'],
    ]);
  });
});
