// GET /v1/openapi.json (CONTRACT 4.4): the document covers exactly the routes the app serves, is
// usable by a client generator, and real responses of a real svc validate against it.
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Ajv2020 } from 'ajv/dist/2020.js';
import type { ValidateFunction } from 'ajv';
import { Hono } from 'hono';
import pino from 'pino';
import { z } from 'zod';
import { startService, waitFor, type ApiClient, type ApiResponse, type OrgCreds, type TestService } from '../helpers/service.ts';
import { startReceiver, type Receiver } from '../helpers/receiver.ts';
import { createHttpApp } from '../../src/http/app.ts';
import { Readiness } from '../../src/readiness.ts';
import { defineRoute, mountRoutes, reply } from '../../src/http/api-route.ts';
import { errorResponse, toHttpError } from '../../src/http/http-error.ts';
import type { AuthEnv } from '../../src/http/auth.ts';
import { TERMINAL } from '../helpers/workflows.ts';
import { openDb } from '../../store/db.ts';
import { recordIngestRejections } from '../../store/ingest-rejections.ts';

type Json = any;

const HOOKS = '/v1/orgs/current/webhooks';
const METHODS = ['get', 'post', 'patch', 'put', 'delete'];

const logs: Json[] = [];
const logger = pino(
  { level: 'warn' },
  new Writable({
    write(chunk, _enc, done) {
      for (const line of String(chunk).split('\n')) if (line.trim()) logs.push(JSON.parse(line));
      done();
    },
  }),
);

let svc: TestService;
let org: OrgCreds;
let api: ApiClient;
let receiver: Receiver;
let doc: Json;
let ajv: Ajv2020;

/** Every operation of the document: method, path template, the operation. */
const operations = (): Array<{ method: string; path: string; op: Json }> =>
  Object.entries(doc.paths as Record<string, Json>).flatMap(([path, item]) =>
    Object.keys(item)
      .filter((m) => METHODS.includes(m))
      .map((method) => ({ method, path, op: item[method] })),
  );

// ------------------------------------------------------------------ JSON Schema validation (ajv, 2020-12)

const BASE = 'https://svc.test/components/';
/** `#/components/schemas/X` → a schema registered with ajv under its own id. */
function rebase(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(rebase);
  if (node === null || typeof node !== 'object') return node;
  return Object.fromEntries(
    Object.entries(node).map(([k, v]) => [
      k,
      k === '$ref' && typeof v === 'string' && v.startsWith('#/components/schemas/')
        ? BASE + v.slice('#/components/schemas/'.length)
        : rebase(v),
    ]),
  );
}

const compiled = new Map<string, ValidateFunction>();
function validatorFor(schema: unknown): ValidateFunction {
  const key = JSON.stringify(schema);
  const known = compiled.get(key);
  if (known) return known;
  const v = ajv.compile(rebase(schema) as object);
  compiled.set(key, v);
  return v;
}

/** operationId → the statuses whose real bodies validated */
const validated = new Map<string, Set<number>>();
const statuses: Array<{ what: string; status: number }> = [];

/**
 * Expect `status`, and the body to validate against the schema that the document gives for this
 * operation and status (204: no body, and none documented). Resolves the body.
 */
function check(r: ApiResponse, method: string, path: string, status: number): Json {
  statuses.push({ what: `${method} ${path}`, status: r.status });
  expect(r.status, `${method.toUpperCase()} ${path}: ${r.text.slice(0, 500)}`).toBe(status);
  const op = doc.paths[path]?.[method];
  expect(op, `${method} ${path} is documented`).toBeDefined();
  const resp = op.responses[String(status)];
  expect(resp, `${op.operationId} documents ${status}`).toBeDefined();
  if (status === 204) {
    expect(r.text).toBe('');
    expect(resp.content).toBeUndefined();
  } else {
    const schema = resp.content?.['application/json']?.schema;
    expect(schema, `${op.operationId} ${status} has a JSON schema`).toBeDefined();
    const validate = validatorFor(schema);
    const ok = validate(r.body);
    expect(ok, `${op.operationId} ${status}: ${ajv.errorsText(validate.errors)}\n${r.text.slice(0, 800)}`).toBe(true);
  }
  if (!validated.has(op.operationId)) validated.set(op.operationId, new Set());
  validated.get(op.operationId)!.add(status);
  return r.body;
}

/** Poll GET /v1/workflows/{id} until `pred`; the last response is validated too. */
async function waitWorkflow(id: string, pred: (wf: Json) => boolean, what: string): Promise<Json> {
  const r = await waitFor(
    async () => {
      const res = await api.get(`/v1/workflows/${id}`);
      return res.status === 200 && pred(res.body) ? res : null;
    },
    20_000,
    what,
  );
  return check(r, 'get', '/v1/workflows/{workflow_id}', 200);
}
const ended = (id: string) => waitWorkflow(id, (wf) => TERMINAL.includes(wf.status), `workflow ${id} to end`);

beforeAll(async () => {
  svc = await startService({}, { logger });
  org = svc.createOrg('openapi-test');
  api = svc.api(org);
  receiver = await startReceiver();
  const r = await fetch(`${svc.url}/v1/openapi.json`); // no credentials
  expect(r.status).toBe(200);
  doc = await r.json();
  ajv = new Ajv2020({ strict: false, allErrors: true });
  for (const [id, schema] of Object.entries(doc.components.schemas as Record<string, object>)) {
    ajv.addSchema({ ...(rebase(schema) as object), $id: BASE + id });
  }
}, 30_000);

afterAll(async () => {
  await svc?.stop();
  await receiver?.close();
});

// ------------------------------------------------------------------ the document and the router agree

describe('the document and the served routes', () => {
  it('every route the app serves under /v1 is documented, and every documented operation is served (and /healthz, /readyz)', () => {
    const app = createHttpApp(svc.server.ctx);
    const served = app.routes
      .filter((r) => r.method !== 'ALL' && (r.path.startsWith('/v1/') || r.path === '/healthz' || r.path === '/readyz'))
      .map((r) => `${r.method} ${r.path.replace(/:(\w+)/g, '{$1}')}`);
    expect(new Set(served).size, 'no route is served twice').toBe(served.length);
    const documented = operations().map(({ method, path }) => `${method.toUpperCase()} ${path}`);
    expect([...served].sort()).toEqual([...documented].sort());
    // the two that the hand-kept table missed, and the document itself
    expect(documented).toEqual(
      expect.arrayContaining([
        'GET /v1/apps/{app_id}',
        'POST /v1/installs/{install_id}/sandbox/deprovision',
        'GET /v1/openapi.json',
        'GET /healthz',
        'GET /readyz',
      ]),
    );
    expect(served.length).toBeGreaterThanOrEqual(32);
  });

  it('is OpenAPI 3.1 the way a client generator needs it', () => {
    expect(doc.openapi).toBe('3.1.0');
    expect(doc.info.title).toBeTypeOf('string');
    const ops = operations();
    const ids = ops.map(({ op }) => op.operationId);
    expect(
      ids.every((id) => typeof id === 'string' && /^[a-z][A-Za-z0-9]*$/.test(id)),
      ids.join(','),
    ).toBe(true);
    expect(new Set(ids).size, 'operationIds are unique').toBe(ids.length);
    for (const { method, path, op } of ops) {
      const where = `${method} ${path}`;
      const names = [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]).sort();
      const declared = (op.parameters ?? []).filter((p: Json) => p.in === 'path');
      expect(declared.map((p: Json) => p.name).sort(), `${where}: path parameters`).toEqual(names);
      for (const p of declared) {
        expect(p.required, `${where}: ${p.name} required`).toBe(true);
        expect(p.schema?.type, `${where}: ${p.name} schema`).toBe('string');
      }
      const codes = Object.keys(op.responses);
      expect(
        codes.some((c) => c.startsWith('2')),
        `${where}: a success response`,
      ).toBe(true);
      for (const code of codes) {
        const resp = op.responses[code];
        expect(resp.description, `${where} ${code}: description`).toBeTypeOf('string');
        if (code === '204') expect(resp.content, `${where} 204 has no body`).toBeUndefined();
        else if (code.startsWith('2')) expect(resp.content?.['application/json']?.schema, `${where} ${code}: body schema`).toBeDefined();
        else if (code === '503' && op.operationId === 'getReadiness')
          expect(resp.content['application/json'].schema.required).toEqual(['ready', 'reasons']);
        else {
          expect(code, `${where}: only CONTRACT 3 statuses`).toMatch(/^(400|401|403|404|409|413|415)$/);
          expect(resp.content['application/json'].schema).toEqual({ $ref: '#/components/schemas/Error' });
        }
      }
      if (['getOpenApiDocument', 'getHealth', 'getReadiness', 'getEventTypeSchema'].includes(op.operationId)) {
        expect(op.security, `${where}: no authentication`).toEqual([]);
      } else {
        expect(codes, `${where}: 401 and 403`).toEqual(expect.arrayContaining(['401', '403']));
      }
      if (op.requestBody) {
        expect(op.requestBody.content['application/json'].schema.type, `${where}: body schema`).toBe('object');
        expect(codes, `${where}: body errors`).toEqual(expect.arrayContaining(['400', '413', '415']));
      }
      // every schema compiles, every reference resolves
      for (const code of codes) {
        const s = op.responses[code].content?.['application/json']?.schema;
        if (s) validatorFor(s);
      }
      if (op.requestBody) validatorFor(op.requestBody.content['application/json'].schema);
    }
    expect(doc.components.schemas.Error.required).toEqual(['error', 'message']);
    expect(Object.keys(doc.components.schemas.Error.properties).sort()).toEqual(['details', 'error', 'message']);
  });

  it('the response schemas admit no undocumented fields, and the request bodies are inline', () => {
    const webhook = doc.components.schemas.Webhook;
    expect(webhook.additionalProperties).toBe(false);
    expect(Object.keys(webhook.properties)).toEqual(
      expect.arrayContaining(['previous_secret_expires_at', 'delivery_status', 'has_secret', 'interests', 'match']),
    );
    expect(webhook.properties).not.toHaveProperty('secret');
    expect(validatorFor({ $ref: '#/components/schemas/Workflow' })({ workflow_id: 'x' })).toBe(false);
    for (const { op } of operations()) {
      if (op.requestBody) expect(JSON.stringify(op.requestBody), op.operationId).not.toContain('$ref');
    }
  });
});

// ------------------------------------------------------------------ real responses validate

describe('real responses validate against the document', () => {
  const ids: Json = {};

  it('the document validates against its own operation', async () => {
    check(await api.get('/v1/openapi.json'), 'get', '/v1/openapi.json', 200);
  });

  it('the operations endpoints: /healthz, /readyz (ready, and not ready with its reasons)', async () => {
    const plain = async (r: Response): Promise<ApiResponse> => {
      const text = await r.text();
      return { status: r.status, text, body: JSON.parse(text) };
    };
    check(await plain(await fetch(`${svc.url}/healthz`)), 'get', '/healthz', 200);
    expect(check(await plain(await fetch(`${svc.url}/readyz`)), 'get', '/readyz', 200)).toEqual({ ready: true });
    const starting = createHttpApp({
      ...svc.server.ctx,
      readiness: new Readiness({ subs: 'the bus subscriptions are not confirmed by the server yet' }),
    });
    expect(check(await plain(await starting.request('/readyz')), 'get', '/readyz', 503).reasons).toHaveLength(1);
  });

  it('webhooks: create, list, get, rotate, ping (delivered, refused, unreachable), delivery status, delete', async () => {
    const a = check(
      await api.post(HOOKS, {
        webhook_url: receiver.hook('a'),
        secret: 'openapi-secret-one',
        interests: {
          resources: { installs: { ops: ['provision'], outcome: 'all', install_degraded: true }, components: { drift_detected: true } },
        },
        match: { installs: { ids: ['inst_b', 'inst_a', 'inst_a'] }, components: { selector: { match_labels: { tier: 'web' } } } },
      }),
      'post',
      HOOKS,
      201,
    );
    expect(a.match.installs.ids).toEqual(['inst_a', 'inst_b']);
    ids.hookA = a.webhook_id;
    const wide = check(await api.post(HOOKS, { webhook_url: receiver.hook('wide') }), 'post', HOOKS, 201);
    expect(wide.match).toBeNull();
    expect(wide.interests).toEqual({ all_events: true });
    receiver.set('refused', { status: 500 });
    const refused = check(await api.post(HOOKS, { webhook_url: receiver.hook('refused') }), 'post', HOOKS, 201);
    const gone = check(await api.post(HOOKS, { webhook_url: 'http://127.0.0.1:9/closed' }), 'post', HOOKS, 201);

    const list = check(await api.get(HOOKS), 'get', HOOKS, 200);
    expect(list.map((w: Json) => w.webhook_id)).toContain(ids.hookA);
    check(await api.get(`${HOOKS}/${ids.hookA}`), 'get', `${HOOKS}/{webhook_id}`, 200);

    const rotated = check(
      await api.patch(`${HOOKS}/${ids.hookA}`, { secret: 'openapi-secret-two', previous_secret_ttl_s: 3600 }),
      'patch',
      `${HOOKS}/{webhook_id}`,
      200,
    );
    expect(rotated.previous_secret_expires_at).toEqual(expect.any(String));
    const resub = check(
      await api.patch(`${HOOKS}/${wide.webhook_id}`, { interests: { resources: { actions: { ops: ['run'] } } } }),
      'patch',
      `${HOOKS}/{webhook_id}`,
      200,
    );
    expect(resub.match).toBeNull();

    const ok = check(await api.post(`${HOOKS}/${ids.hookA}/ping`), 'post', `${HOOKS}/{webhook_id}/ping`, 200);
    expect(ok).toMatchObject({ delivered: true, status: 200 });
    const no = check(await api.post(`${HOOKS}/${refused.webhook_id}/ping`), 'post', `${HOOKS}/{webhook_id}/ping`, 200);
    expect(no).toMatchObject({ delivered: false, status: 500 });
    const down = check(await api.post(`${HOOKS}/${gone.webhook_id}/ping`), 'post', `${HOOKS}/{webhook_id}/ping`, 200);
    expect(down.delivered).toBe(false);
    expect(down.error).toEqual(expect.any(String));

    // a delivery status with every field set: pings count like deliveries
    check(await api.post(`${HOOKS}/${refused.webhook_id}/ping`), 'post', `${HOOKS}/{webhook_id}/ping`, 200);
    check(await api.post(`${HOOKS}/${refused.webhook_id}/ping`), 'post', `${HOOKS}/{webhook_id}/ping`, 200);
    const w = check(await api.get(`${HOOKS}/${refused.webhook_id}`), 'get', `${HOOKS}/{webhook_id}`, 200);
    expect(w.delivery_status).toMatchObject({ last_outcome: 'failure', last_status_code: 500, consecutive_failures: 3 });
    const all = check(await api.get(HOOKS), 'get', HOOKS, 200);
    expect(all.find((x: Json) => x.webhook_id === refused.webhook_id).delivery_status).toMatchObject({
      attempts_total: 3,
      failures_total: 3,
      last_error: 'HTTP 500',
    });

    // the delivery watchdog (CONTRACT 4.1): disable with a note, enable refused while the ping fails, then enabled
    const off = check(
      await api.post(`${HOOKS}/${refused.webhook_id}/disable`, { note: 'maintenance' }),
      'post',
      `${HOOKS}/{webhook_id}/disable`,
      200,
    );
    expect(off.delivery_status).toMatchObject({ state: 'disabled', disabled_reason: 'maintenance', failing_since: expect.any(String) });
    check(await api.post(`${HOOKS}/${refused.webhook_id}/enable`, {}), 'post', `${HOOKS}/{webhook_id}/enable`, 409);
    check(await api.post(`${HOOKS}/${ids.hookA}/disable`), 'post', `${HOOKS}/{webhook_id}/disable`, 200);
    const on = check(await api.post(`${HOOKS}/${ids.hookA}/enable`, { recover: true }), 'post', `${HOOKS}/{webhook_id}/enable`, 200);
    expect(on.webhook.delivery_status.state).toBe('active');

    check(await api.del(`${HOOKS}/${gone.webhook_id}`), 'delete', `${HOOKS}/{webhook_id}`, 204);
  });

  it('apps, configs, installs and install health', async () => {
    const app = check(await api.post('/v1/apps', { name: 'shop' }), 'post', '/v1/apps', 201);
    ids.app = app.app_id;
    const got = check(await api.get(`/v1/apps/${ids.app}`), 'get', '/v1/apps/{app_id}', 200);
    expect(got).toMatchObject({ app_id: ids.app, name: 'shop', org_id: org.org_id });
    const apps = check(await api.get('/v1/apps?limit=10'), 'get', '/v1/apps', 200);
    expect(apps[0]).toMatchObject({ app_id: ids.app, name: 'shop' });

    const CONFIGS = '/v1/apps/{app_id}/configs';
    const cfg1 = check(
      await api.post(`/v1/apps/${ids.app}/configs`, {
        sandbox: { region: 'eu', size: { cpu: 2 } },
        components: [
          { name: 'api', type: 'helm', labels: { tier: 'web' }, values: { image: 'api:1', replicas: 2 } },
          { name: 'db', labels: { tier: 'data' } },
        ],
        actions: [{ name: 'migrate', labels: { kind: 'db' }, inputs: { target: { required: true }, dry_run: {} } }],
        inputs: { replicas: 2 },
      }),
      'post',
      CONFIGS,
      201,
    );
    expect(cfg1.version).toBe(1);
    const cfg2 = check(
      await api.post(`/v1/apps/${ids.app}/configs`, {
        sandbox: { region: 'us' },
        components: [
          { name: 'api', type: 'helm', labels: { tier: 'web', canary: 'yes' }, values: { image: 'api:2', replicas: 2 } },
          { name: 'cache' },
        ],
        inputs: { replicas: 3 },
      }),
      'post',
      CONFIGS,
      201,
    );
    expect(cfg2.version).toBe(2);
    ids.cfg1 = cfg1.app_config_id;
    ids.cfg2 = cfg2.app_config_id;
    const configs = check(await api.get(`/v1/apps/${ids.app}/configs`), 'get', CONFIGS, 200);
    expect(configs.map((c: Json) => c.version)).toEqual([2, 1]);

    const inst = check(
      await api.post('/v1/installs', { app_id: ids.app, name: 'eu-1', app_config_id: ids.cfg1, labels: { env: 'prod' } }),
      'post',
      '/v1/installs',
      201,
    );
    ids.inst = inst.install_id;
    const inst2 = check(
      await api.post('/v1/installs', { app_id: ids.app, name: 'us-1', labels: { env: 'staging' } }),
      'post',
      '/v1/installs',
      201,
    );
    ids.inst2 = inst2.install_id;
    for (const id of [ids.inst, ids.inst2]) {
      const wfs = check(await api.get(`/v1/installs/${id}/workflows`), 'get', '/v1/installs/{install_id}/workflows', 200);
      const provision = wfs.find((w: Json) => w.type === 'provision');
      expect((await ended(provision.workflow_id)).status).toBe('succeeded');
    }

    // a health verdict from a producer: the install's health and its component's move off `unknown`
    const api1 = inst.components.find((c: Json) => c.name === 'api');
    const ack = await svc.server.bus.request(
      `svc.ingest.${org.org_id}.health.${ids.inst}`,
      JSON.stringify({ component_id: api1.component_id, verdict: 'degraded', reason: 'slow' }),
      { timeoutMs: 5000 },
    );
    expect(ack.json()).toMatchObject({ ok: true });
    const degraded = check(await api.get(`/v1/installs/${ids.inst}`), 'get', '/v1/installs/{install_id}', 200);
    expect(degraded.health).toBe('degraded');
    expect(degraded.provisioned).toBe(true);
    const list = check(await api.get('/v1/installs'), 'get', '/v1/installs', 200);
    expect(list).toHaveLength(2);
    ids.components = Object.fromEntries(degraded.components.map((c: Json) => [c.name, c.component_id]));
    ids.actions = Object.fromEntries(degraded.actions.map((a: Json) => [a.name, a.action_id]));
  });

  it('every install workflow route', async () => {
    const I = '/v1/installs/{install_id}';
    const base = `/v1/installs/${ids.inst}`;
    const started: Array<{ id: string; type: string }> = [];
    const start = async (method: 'post' | 'patch', suffix: string, template: string, type: string, body?: unknown) => {
      const wf = check(await api[method](`${base}${suffix}`, body), method, `${I}${template}`, 201);
      expect(wf.type).toBe(type);
      expect(wf.steps.length).toBeGreaterThan(0);
      started.push({ id: wf.workflow_id, type });
    };
    await start('post', '/reprovision', '/reprovision', 'reprovision');
    await start('post', '/sandbox/reprovision', '/sandbox/reprovision', 'reprovision_sandbox');
    await start('post', '/sandbox/deprovision', '/sandbox/deprovision', 'deprovision_sandbox');
    await start('post', `/components/${ids.components.api}/deploy`, '/components/{component_id}/deploy', 'manual_deploy');
    await start('post', `/components/${ids.components.db}/teardown`, '/components/{component_id}/teardown', 'teardown_component');
    await start('post', `/actions/${ids.actions.migrate}/runs`, '/actions/{action_id}/runs', 'action_workflow_run'); // no body; target missing
    await start('post', `/actions/${ids.actions.migrate}/runs`, '/actions/{action_id}/runs', 'action_workflow_run', {
      inputs: { target: 'prod' },
    });
    await start('post', '/drift-scans', '/drift-scans', 'drift_run');
    await start('post', '/drift-scans', '/drift-scans', 'drift_run_reprovision_sandbox', { sandbox: true });
    await start('patch', '/inputs', '/inputs', 'input_update', { inputs: { replicas: 5 } });
    await start('post', '/secrets/sync', '/secrets/sync', 'sync_secrets');
    const outcomes = [];
    for (const { id } of started) outcomes.push((await ended(id)).status);
    expect(outcomes).toContain('succeeded');
    expect(outcomes, 'the run without its required input fails').toContain('failed');
    const wfs = check(await api.get(`${base}/workflows`), 'get', `${I}/workflows`, 200);
    expect(wfs.length).toBeGreaterThanOrEqual(started.length + 1);
  });

  it('rollback: versions, diffs, config update (plan_only and applied)', async () => {
    const I = '/v1/installs/{install_id}';
    const base = `/v1/installs/${ids.inst}`;
    const planned = check(
      await api.post(`${base}/app-config-updates`, { app_config_id: ids.cfg2, plan_only: true }),
      'post',
      `${I}/app-config-updates`,
      200,
    );
    expect(planned.applied).toBe(false);
    expect(planned.plan).toMatchObject({ from_app_config_id: ids.cfg1, to_app_config_id: ids.cfg2, changed: true, sandbox_changed: true });
    const applied = check(
      await api.post(`${base}/app-config-updates`, { app_config_id: ids.cfg2 }),
      'post',
      `${I}/app-config-updates`,
      201,
    );
    expect(applied).toMatchObject({ applied: true, workflow_id: expect.any(String), version_id: expect.any(String) });
    await ended(applied.workflow_id);

    const versions = check(await api.get(`${base}/app-config-versions`), 'get', `${I}/app-config-versions`, 200);
    expect(versions.map((v: Json) => v.version)).toEqual([2, 1]);
    expect(versions[0].old_app_config_id).toBe(ids.cfg1);
    for (const v of versions) {
      const diff = check(
        await api.get(`${base}/app-config-versions/${v.version_id}/diff`),
        'get',
        `${I}/app-config-versions/{version_id}/diff`,
        200,
      );
      expect(diff.version_id).toBe(v.version_id);
    }
    const latest = await api.get(`${base}/app-config-versions/${versions[0].version_id}/diff`);
    const changedApi = latest.body.components.changed.find((c: Json) => c.name === 'api');
    expect(changedApi.changes).toEqual(expect.arrayContaining([{ path: 'values.image', op: 'replace', old: 'api:1', new: 'api:2' }]));
  });

  it('branches: create, run, approval, child workflows, cancel', async () => {
    const branch = check(
      await api.post(`/v1/apps/${ids.app}/branches`, {
        name: 'main',
        install_groups: [
          { name: 'canary', install_ids: [ids.inst] },
          { name: 'rest', selector: { match_labels: { env: 'staging' } } },
        ],
      }),
      'post',
      '/v1/apps/{app_id}/branches',
      201,
    );
    const RUNS = '/v1/apps/{app_id}/branches/{app_branch_id}/runs';
    const run = check(
      await api.post(`/v1/apps/${ids.app}/branches/${branch.app_branch_id}/runs`, { app_config_id: ids.cfg1, skip_builds: true }),
      'post',
      RUNS,
      201,
    );
    expect(run).toMatchObject({ run_id: expect.any(String), workflow_id: expect.any(String) });
    const stepNamed = (wf: Json, name: string) => wf.steps.find((s: Json) => s.name === name);
    const waiting = await waitWorkflow(
      run.workflow_id,
      (wf) => stepNamed(wf, 'plan install group: canary')?.status === 'awaiting_approval',
      'the canary plan to await approval',
    );
    const plan = stepNamed(waiting, 'plan install group: canary');
    expect(plan.approval.status).toBe('requested');
    expect(plan.plan.installs[0].install_id).toBe(ids.inst);

    const APPROVAL = '/v1/workflows/{workflow_id}/steps/{step_id}/approval';
    const approved = check(
      await api.post(`/v1/workflows/${run.workflow_id}/steps/${plan.step_id}/approval`, { response: 'approved', note: 'ship it' }),
      'post',
      APPROVAL,
      200,
    );
    expect(approved.approval).toMatchObject({ status: 'approved', note: 'ship it', responded_at: expect.any(String) });
    // answered already: 409
    check(
      await api.post(`/v1/workflows/${run.workflow_id}/steps/${plan.step_id}/approval`, { response: 'rejected' }),
      'post',
      APPROVAL,
      409,
    );

    // the canary deploy starts an app_config_update child workflow whose parent is that step
    const rest = await waitWorkflow(
      run.workflow_id,
      (wf) => stepNamed(wf, 'plan install group: rest')?.status === 'awaiting_approval',
      'the rest plan to await approval',
    );
    const deployStep = stepNamed(rest, 'deploy install group: canary');
    const children = check(await api.get(`/v1/installs/${ids.inst}/workflows`), 'get', '/v1/installs/{install_id}/workflows', 200);
    const child = children.find((w: Json) => w.parent?.step_id === deployStep.step_id);
    expect(child, 'a child workflow of the canary deploy step').toBeDefined();
    const childWf = await ended(child.workflow_id);
    expect(childWf.parent).toEqual({ workflow_id: run.workflow_id, step_id: deployStep.step_id, kind: 'workflow_step' });

    const CANCEL = '/v1/workflows/{workflow_id}/cancel';
    const cancelled = check(await api.post(`/v1/workflows/${run.workflow_id}/cancel`), 'post', CANCEL, 200);
    expect(cancelled.status).toBe('cancelled');
    check(await api.post(`/v1/workflows/${run.workflow_id}/cancel`), 'post', CANCEL, 409);
  });

  it('veto and fleet rollback: veto, a vetoed update (409 vetoed), unveto, a plan_only rollback, a gated rollback without approvals', async () => {
    const VETO = '/v1/apps/{app_id}/configs/{app_config_id}/veto';
    const vetoed = check(await api.post(`/v1/apps/${ids.app}/configs/${ids.cfg2}/veto`, { reason: 'bad image' }), 'post', VETO, 200);
    expect(vetoed).toMatchObject({ app_config_id: ids.cfg2, vetoed: { reason: 'bad image', at: expect.any(String) } });
    const refused = check(
      await api.post(`/v1/installs/${ids.inst}/app-config-updates`, { app_config_id: ids.cfg2 }),
      'post',
      '/v1/installs/{install_id}/app-config-updates',
      409,
    );
    expect(refused.error).toBe('vetoed');
    const lifted = check(await api.del(`/v1/apps/${ids.app}/configs/${ids.cfg2}/veto`), 'delete', VETO, 200);
    expect(lifted.vetoed).toBeNull();

    const ROLLBACKS = '/v1/apps/{app_id}/rollbacks';
    const planned = check(await api.post(`/v1/apps/${ids.app}/rollbacks`, { to: 'previous', plan_only: true }), 'post', ROLLBACKS, 200);
    expect(planned.applied).toBe(false);
    const started = check(
      await api.post(`/v1/apps/${ids.app}/rollbacks`, {
        to: ids.cfg2,
        install_ids: [ids.inst],
        approval: 'none',
        health_gate: { bake: '0s', on: ['unhealthy'] },
      }),
      'post',
      ROLLBACKS,
      201,
    );
    expect(started.plan.installs.map((i: Json) => i.install_id)).toEqual([ids.inst]);
    const done = await ended(started.workflow_id);
    expect(done.status, done.error).toBe('succeeded');
  });

  it('change windows: create, list, delete, and the 400 and 404 they answer', async () => {
    const WINDOWS = '/v1/apps/{app_id}/change-windows';
    const made = check(
      await api.post(`/v1/apps/${ids.app}/change-windows`, {
        name: 'weekend',
        kind: 'allow',
        days: ['sat', 'sun'],
        start: '02:00',
        duration: '2h',
        time_zone: 'America/Los_Angeles',
        install_ids: [ids.inst],
        applies_to: ['rollback'],
      }),
      'post',
      WINDOWS,
      201,
    );
    expect(made).toMatchObject({ name: 'weekend', duration: '2h', install_ids: [ids.inst], selector: null, applies_to: ['rollback'] });
    check(
      await api.post(`/v1/apps/${ids.app}/change-windows`, {
        name: 'x',
        kind: 'deny',
        days: ['sun'],
        start: '2:00',
        duration: '2h',
        time_zone: 'UTC',
      }),
      'post',
      WINDOWS,
      400,
    );
    const listed = check(await api.get(`/v1/apps/${ids.app}/change-windows`), 'get', WINDOWS, 200);
    expect(listed.map((w: Json) => w.window_id)).toContain(made.window_id);
    check(await api.get('/v1/apps/app_nope/change-windows'), 'get', WINDOWS, 404);
    check(await api.del(`/v1/apps/${ids.app}/change-windows/${made.window_id}`), 'delete', `${WINDOWS}/{window_id}`, 204);
    check(await api.del(`/v1/apps/${ids.app}/change-windows/${made.window_id}`), 'delete', `${WINDOWS}/{window_id}`, 404);
  });

  it('approval policy: put, get, delete, and the 400 and 404 they answer (CONTRACT 10.4)', async () => {
    const POLICY = '/v1/apps/{app_id}/approval-policy';
    const path = `/v1/apps/${ids.app}/approval-policy`;
    const put = (body: unknown) => api.raw('PUT', path, { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });
    check(await api.get(path), 'get', POLICY, 404);
    check(await put({ rules: [{ name: 'none', required: 1, approvers: {} }] }), 'put', POLICY, 400);
    const made = check(
      await put({ rules: [{ name: 'ops', required: 2, approvers: { scopes: ['deploy', 'admin'] } }] }),
      'put',
      POLICY,
      200,
    );
    expect(made).toMatchObject({ prevent_self_approval: true, reject: 'any', expires_after: null, auto_approve: null });
    check(await api.get(path), 'get', POLICY, 200);
    check(await api.del(path), 'delete', POLICY, 204);
    check(await api.del(path), 'delete', POLICY, 404);
  });

  it('steps awaiting approval and one-time approval links (CONTRACT 10.4)', async () => {
    const branch = (
      await api.post(`/v1/apps/${ids.app}/branches`, { name: 'links', install_groups: [{ name: 'one', install_ids: [ids.inst] }] })
    ).body;
    const run = (
      await api.post(`/v1/apps/${ids.app}/branches/${branch.app_branch_id}/runs`, { app_config_id: ids.cfg1, skip_builds: true })
    ).body;
    const waiting = await waitWorkflow(
      run.workflow_id,
      (wf) => wf.steps.some((s: Json) => s.status === 'awaiting_approval'),
      'the plan to await approval',
    );
    const step = waiting.steps.find((s: Json) => s.status === 'awaiting_approval');
    const pending = check(await api.get('/v1/approvals'), 'get', '/v1/approvals', 200);
    expect(pending.data.map((p: Json) => p.step.step_id)).toContain(step.step_id);
    const LINKS = '/v1/workflows/{workflow_id}/steps/{step_id}/approval-links';
    const tokenId = (await api.get('/v1/audit?limit=1')).body.data[0].actor.token_id;
    const at = `/v1/workflows/${run.workflow_id}/steps/${step.step_id}/approval-links`;
    check(await api.post(at, { token_id: tokenId, expires_in: '30s' }), 'post', LINKS, 400);
    const link = check(await api.post(at, { token_id: tokenId, expires_in: '1h' }), 'post', LINKS, 201);
    expect(link.url).toMatch(/approval-links\//);
    check(
      await api.post('/v1/workflows/wf_nope/steps/st_nope/approval-links', { token_id: tokenId, expires_in: '1h' }),
      'post',
      LINKS,
      404,
    );
    expect((await api.post(`/v1/workflows/${run.workflow_id}/cancel`)).status).toBe(200);
  });

  it('a workflow that a producer reports (external) reads back through the same schema', async () => {
    const wfId = 'ext_openapi_1';
    const send = async (msg: unknown) => {
      const r = await svc.server.bus.request(`svc.ingest.${org.org_id}.workflows.${wfId}`, JSON.stringify(msg), { timeoutMs: 5000 });
      expect(r.json()).toMatchObject({ ok: true });
    };
    const workflow = { id: wfId, type: 'deploy_components', owner_id: ids.inst2, owner_type: 'installs' };
    await send({ kind: 'workflow', transition: 'started', workflow });
    await send({
      kind: 'workflow_step',
      transition: 'started',
      workflow,
      step: { id: 'ext_step_1', name: 'custom step', idx: 0, execution_type: 'user' },
    });
    await send({
      kind: 'workflow_step',
      transition: 'failed',
      workflow,
      step: { id: 'ext_step_1', name: 'custom step', idx: 0, execution_type: 'user' },
      error: 'boom',
    });
    const wf = await waitWorkflow(wfId, (w) => w.steps[0]?.status === 'failed', 'the external step to fail');
    expect(wf.external).toBe(true);
    expect(wf.steps[0]).toMatchObject({ target_type: null, error: 'boom' });
  });

  it('deprovision', async () => {
    const wf = check(await api.post(`/v1/installs/${ids.inst2}/deprovision`), 'post', '/v1/installs/{install_id}/deprovision', 201);
    expect(wf.type).toBe('deprovision');
    await ended(wf.workflow_id);
  });

  it('error responses validate against the Error schema of their operation', async () => {
    const bad = check(await api.post('/v1/apps', { name: 'x', bogus: 1, also: 2 }), 'post', '/v1/apps', 400);
    expect(bad.error).toBe('invalid_request');
    expect(bad.details.map((d: Json) => d.path).sort()).toEqual(['also', 'bogus']);
    const malformed = check(
      await api.raw('POST', '/v1/apps', { body: '{"name":', headers: { 'content-type': 'application/json' } }),
      'post',
      '/v1/apps',
      400,
    );
    expect(malformed.error).toBe('invalid_request');
    check(await api.raw('POST', '/v1/apps', { body: 'name=x', headers: { 'content-type': 'text/plain' } }), 'post', '/v1/apps', 415);
    check(
      await api.raw('POST', '/v1/apps', { body: `{"name":"${'x'.repeat(1024 * 1024)}"}`, headers: { 'content-type': 'application/json' } }),
      'post',
      '/v1/apps',
      413,
    );
    check(await api.get('/v1/installs/inst_nope'), 'get', '/v1/installs/{install_id}', 404);
    // a PATCH of a webhook that does not exist is 404 before its body is read
    check(await api.patch(`${HOOKS}/wh_nope`, { bogus: true }), 'patch', `${HOOKS}/{webhook_id}`, 404);
    check(await api.get('/v1/workflows/wf_nope'), 'get', '/v1/workflows/{workflow_id}', 404);
    const dup = await api.get(`${HOOKS}/${ids.hookA}`);
    check(await api.post(HOOKS, { webhook_url: dup.body.webhook_url, match: dup.body.match }), 'post', HOOKS, 409);
    const anon = await fetch(`${svc.url}/v1/installs`);
    check({ status: anon.status, text: '', body: await anon.json() } as ApiResponse, 'get', '/v1/installs', 401);
    const other = svc.createOrg('other');
    const wrongOrg = await fetch(`${svc.url}/v1/installs`, {
      headers: { authorization: `Bearer ${other.api_token}`, 'x-svc-org-id': org.org_id },
    });
    check({ status: wrongOrg.status, text: '', body: await wrongOrg.json() } as ApiResponse, 'get', '/v1/installs', 403);
  });

  it('event history, attempts, recover and resend (CONTRACT 4.5)', async () => {
    const page = check(await api.get('/v1/events?limit=2'), 'get', '/v1/events', 200);
    expect(page.data.length).toBeGreaterThan(0);
    check(await api.get(`/v1/events?after=${page.next_cursor}`), 'get', '/v1/events', 200);
    check(await api.get('/v1/events?limit=0'), 'get', '/v1/events', 400);
    const ev = check(await api.get(`/v1/events/${page.data[0].id}`), 'get', '/v1/events/{event_id}', 200);
    check(await api.get('/v1/events/nope'), 'get', '/v1/events/{event_id}', 404);
    const audit = check(await api.get('/v1/audit?limit=2'), 'get', '/v1/audit', 200);
    expect(audit.data.length).toBe(2);
    check(await api.get('/v1/audit?limit=0'), 'get', '/v1/audit', 400);
    // late refusals of durable ingest (CONTRACT 9), kept as the engine keeps them: a JSON fact and one that is not JSON
    const db = openDb(svc.db);
    const refused = (fact: string) => ({ org_id: org.org_id, subject: 'svc.ingest.x', received_at: Date.now(), error: 'refused', fact });
    db.transaction(() => recordIngestRejections(db, [refused('{"a":[1]}'), refused('not json')])).immediate();
    db.close();
    const rejections = check(await api.get('/v1/ingest/rejections?limit=1'), 'get', '/v1/ingest/rejections', 200);
    check(await api.get(`/v1/ingest/rejections?after=${rejections.next_cursor}`), 'get', '/v1/ingest/rejections', 200);
    check(await api.get('/v1/ingest/rejections?limit=0'), 'get', '/v1/ingest/rejections', 400);
    const ATTEMPTS = `${HOOKS}/{webhook_id}/attempts`;
    check(await api.get(`${HOOKS}/${ids.hookA}/attempts?limit=1`), 'get', ATTEMPTS, 200);
    check(await api.get(`${HOOKS}/${ids.hookA}/attempts?outcome=no`), 'get', ATTEMPTS, 400);
    const sent = check(await api.post(`${HOOKS}/${ids.hookA}/resend`, { event_id: ev.id }), 'post', `${HOOKS}/{webhook_id}/resend`, 200);
    expect(sent.delivered).toBe(true);
    check(await api.post(`${HOOKS}/${ids.hookA}/resend`, { event_id: 'nope' }), 'post', `${HOOKS}/{webhook_id}/resend`, 404);
    const rec = check(
      await api.post(`${HOOKS}/${ids.hookA}/recover`, { since: '1h', only_failed: false }),
      'post',
      `${HOOKS}/{webhook_id}/recover`,
      202,
    );
    expect(rec.events).toBeGreaterThan(0);
    check(await api.post(`${HOOKS}/${ids.hookA}/recover`, { since: 'x' }), 'post', `${HOOKS}/{webhook_id}/recover`, 400);
    check(
      await api.get(`${HOOKS}/${ids.hookA}/recoveries/${rec.recovery_id}`),
      'get',
      `${HOOKS}/{webhook_id}/recoveries/{recovery_id}`,
      200,
    );
    check(await api.get(`${HOOKS}/${ids.hookA}/recoveries/nope`), 'get', `${HOOKS}/{webhook_id}/recoveries/{recovery_id}`, 404);
    // filters' dry runs and recipients (CONTRACT 10.2)
    const TEST = `${HOOKS}/test-filter`;
    const run = check(await api.post(TEST, { filter: { type: { $exist: true } }, since: '1h' }), 'post', TEST, 200);
    expect(run.examined).toBeGreaterThan(0);
    check(await api.post(TEST, { filter: { data: { nope: 1 } }, event_id: ev.id }), 'post', TEST, 400);
    check(await api.post(TEST, { filter: null, event_id: 'nope' }), 'post', TEST, 404);
    const OWN = `${HOOKS}/{webhook_id}/test-filter`;
    check(await api.post(`${HOOKS}/${ids.hookA}/test-filter`, { event: ev }), 'post', OWN, 200);
    check(await api.post(`${HOOKS}/nope/test-filter`, { event_id: ev.id }), 'post', OWN, 404);
    check(await api.post(`${HOOKS}/${ids.hookA}/test-filter`, {}), 'post', OWN, 400);
    const RECIPIENTS = '/v1/events/{event_id}/recipients';
    const rcpt = check(await api.get(`/v1/events/${ev.id}/recipients`), 'get', RECIPIENTS, 200);
    expect(rcpt.data.length).toBeGreaterThan(0);
    check(await api.get('/v1/events/nope/recipients'), 'get', RECIPIENTS, 404);
  });

  it('the event catalog and examples (CONTRACT 10.3)', async () => {
    const types = check(await api.get('/v1/event-types'), 'get', '/v1/event-types', 200);
    expect(types.length).toBeGreaterThan(10);
    const SCHEMA = '/v1/event-types/{type}/schema';
    const doc = check(await api.get(`/v1/event-types/${types[0].type}/schema`), 'get', SCHEMA, 200);
    expect(doc.$id).toBe(types[0].schema_url);
    check(await api.get('/v1/event-types/com.svc.nope.v1/schema'), 'get', SCHEMA, 404);
    const EXAMPLES = `${HOOKS}/{webhook_id}/examples`;
    const sent = check(await api.post(`${HOOKS}/${ids.hookA}/examples`, { type: types[0].type }), 'post', EXAMPLES, 200);
    expect(sent.delivered).toBe(true);
    check(await api.post(`${HOOKS}/${ids.hookA}/examples`, { type: 'nope' }), 'post', EXAMPLES, 400);
    check(await api.post(`${HOOKS}/wh_nope/examples`, { type: types[0].type }), 'post', EXAMPLES, 404);
  });

  it('every documented operation and success status was exercised and validated; nothing was a 5xx or left out', () => {
    const missing: string[] = [];
    for (const { op } of operations()) {
      for (const code of Object.keys(op.responses).filter((c) => c.startsWith('2'))) {
        if (!validated.get(op.operationId)?.has(Number(code))) missing.push(`${op.operationId} ${code}`);
      }
    }
    expect(missing).toEqual([]);
    expect(
      statuses.filter((s) => s.status >= 500 && !(s.what === 'get /readyz' && s.status === 503)),
      'a 5xx (but the documented 503 of /readyz)',
    ).toEqual([]);
    const shaping = logs.filter((l) => /documented/.test(String(l.msg)));
    expect(shaping, JSON.stringify(shaping.slice(0, 3))).toEqual([]);
  });
});

// ------------------------------------------------------------------ responses go out through their schema

describe('shaping a response through its schema', () => {
  const schema = z.object({ a: z.number(), nested: z.object({ b: z.string() }).optional() });
  const routes = [
    defineRoute({
      operationId: 'leaky',
      method: 'get',
      path: '/v1/leaky',
      tag: 'test',
      summary: 'answers with fields its schema does not have',
      scope: 'public',
      responses: { 200: { description: 'x', schema } },
      errors: [],
      handle: () => reply.ok({ a: 1, secret: 'hunter2-hunter2', nested: { b: 'x', token: 't0ps3cret' } } as z.input<typeof schema>),
    }),
    defineRoute({
      operationId: 'wrong',
      method: 'get',
      path: '/v1/wrong',
      tag: 'test',
      summary: 'answers with a body its schema refuses',
      scope: 'public',
      responses: { 200: { description: 'x', schema } },
      errors: [],
      handle: () => reply.ok({ a: 'one' } as unknown as z.input<typeof schema>),
    }),
  ];
  let app: Hono<AuthEnv>;
  beforeAll(() => {
    app = new Hono<AuthEnv>();
    app.onError((err, c) => errorResponse(c, toHttpError(err)));
    mountRoutes(app, svc.server.ctx, routes);
  });

  it('a field missing from the schema is left out of the response, and logged by path (not by value)', async () => {
    const r = await app.request('/leaky');
    expect(r.status).toBe(200);
    const text = await r.text();
    expect(JSON.parse(text)).toEqual({ a: 1, nested: { b: 'x' } });
    const line = logs.find((l) => l.operation === 'leaky');
    expect(line?.dropped).toEqual(['secret', 'nested.token']);
    expect(JSON.stringify(logs)).not.toContain('hunter2');
    expect(JSON.stringify(logs)).not.toContain('t0ps3cret');
  });

  it('a body its schema refuses is a 500 in the CONTRACT 3 shape, never sent', async () => {
    const r = await app.request('/wrong');
    expect(r.status).toBe(500);
    expect(await r.json()).toEqual({ error: 'internal', message: 'internal error' });
    expect(logs.find((l) => l.operation === 'wrong')?.issues).toEqual([{ path: 'a', message: expect.any(String) }]);
  });
});
