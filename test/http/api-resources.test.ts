// Our own integration tests of bad input on apps, configs, branches, installs and workflows
// (CONTRACT 3, 4.2, 4.3): a real svc in process with the local runner, a real SQLite file that we
// read (read-only) to prove that each rejected request left the store as it was. Each endpoint
// also gets one happy-path call that returns its documented shape.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import Database from 'better-sqlite3';
import { startService, waitFor, type ApiClient, type ApiResponse, type OrgCreds, type TestService } from '../helpers/service.ts';
import { TERMINAL } from '../helpers/workflows.ts';

let svc: TestService;
let db: Database.Database;
let orgA: OrgCreds;
let orgB: OrgCreds;
let A: ApiClient;
let B: ApiClient;
const statuses: Array<{ what: string; status: number; text: string }> = [];

function recording(client: ApiClient): ApiClient {
  const rec = async <T>(what: string, p: Promise<ApiResponse<T>>) => {
    const r = await p;
    statuses.push({ what, status: r.status, text: r.text });
    return r;
  };
  return {
    get: (p) => rec(`GET ${p}`, client.get(p)),
    post: (p, body) => rec(`POST ${p}`, client.post(p, body)),
    patch: (p, body) => rec(`PATCH ${p}`, client.patch(p, body)),
    del: (p) => rec(`DELETE ${p}`, client.del(p)),
    raw: (method, p, init) => rec(`${method} ${p}`, client.raw(method, p, init)),
  };
}

const TABLES = [
  'apps',
  'app_configs',
  'app_branches',
  'installs',
  'install_components',
  'install_actions',
  'runners',
  'workflows',
  'steps',
  'jobs',
  'app_config_versions',
  'webhooks',
] as const;

/** Row counts of every table a rejected request could touch, plus the rows that must not move. */
function storeState() {
  const counts = Object.fromEntries(TABLES.map((t) => [t, (db.prepare(`SELECT COUNT(*) AS n FROM ${t}`).get() as { n: number }).n]));
  return {
    counts,
    installs: db
      .prepare('SELECT install_id, app_id, name, labels, app_config_id, app_branch_id, inputs FROM installs ORDER BY install_id')
      .all(),
    workflows: db.prepare('SELECT workflow_id, status, error FROM workflows ORDER BY workflow_id').all(),
    steps: db.prepare('SELECT workflow_id, step_id, status, approval FROM steps ORDER BY workflow_id, step_id').all(),
    versions: db.prepare('SELECT version_id, app_config_id, status FROM app_config_versions ORDER BY version_id').all(),
  };
}

/** Wait until nothing is running: every workflow is terminal or waits on an approval. */
async function settle() {
  await waitFor(
    () => {
      const busy = db
        .prepare(
          `SELECT COUNT(*) AS n FROM workflows w WHERE w.status NOT IN ('succeeded','failed','cancelled')
           AND NOT EXISTS (SELECT 1 FROM steps s WHERE s.workflow_id = w.workflow_id AND s.status = 'awaiting_approval')`,
        )
        .get() as { n: number };
      return busy.n === 0;
    },
    20_000,
    'all workflows to settle',
  );
}

function detailPaths(r: ApiResponse): string[] {
  return Array.isArray(r.body?.details) ? r.body.details.map((d: { path: string }) => d.path) : [];
}

function expectError(r: ApiResponse, status: number, code: string) {
  expect(r.status, `${status} expected, got ${r.status}: ${r.text}`).toBe(status);
  expect(r.body?.error, r.text).toBe(code);
  expect(typeof r.body.message).toBe('string');
}

/** Send; expect `status`/`code` (and for 400 a detail naming `path`); and the store unchanged. */
async function rejected(send: () => Promise<ApiResponse>, status: number, code: string, path?: string) {
  await settle();
  const before = storeState();
  const r = await send();
  expectError(r, status, code);
  if (path !== undefined) expect(detailPaths(r), r.text).toContain(path);
  expect(storeState()).toEqual(before);
  return r;
}
const bad = (send: () => Promise<ApiResponse>, path: string) => rejected(send, 400, 'invalid_request', path);
const notFound = (send: () => Promise<ApiResponse>) => rejected(send, 404, 'not_found');
const conflict = (send: () => Promise<ApiResponse>) => rejected(send, 409, 'conflict');

async function created<T = any>(r: Promise<ApiResponse<T>>, status = 201): Promise<T> {
  const res = await r;
  expect(res.status, res.text).toBe(status);
  return res.body;
}

async function workflowDone(api: ApiClient, id: string, status = 'succeeded') {
  const wf = await waitFor(
    async () => {
      const r = await api.get(`/v1/workflows/${id}`);
      return TERMINAL.includes(r.body?.status) ? r.body : undefined;
    },
    20_000,
    `workflow ${id}`,
  );
  expect(wf.status, JSON.stringify(wf)).toBe(status);
  return wf;
}

async function stepAwaiting(api: ApiClient, wfId: string, name: string) {
  return waitFor(
    async () => {
      const r = await api.get(`/v1/workflows/${wfId}`);
      return r.body?.steps?.find((s: { name: string; status: string }) => s.name === name && s.status === 'awaiting_approval');
    },
    20_000,
    `step ${name} awaiting approval`,
  );
}

// fixtures
const CONFIG_1 = {
  sandbox: { size: 'small' },
  components: [
    { name: 'api', type: 'helm', labels: { tier: 'web' }, values: { replicas: 1 } },
    { name: 'db', labels: { tier: 'data' } },
  ],
  actions: [{ name: 'migrate', labels: { kind: 'ops' }, inputs: { target: { required: true }, dry_run: {} } }],
  inputs: { region: 'eu' },
};
const CONFIG_2 = { ...CONFIG_1, components: [{ ...CONFIG_1.components[0], values: { replicas: 3 } }, CONFIG_1.components[1]] };

let appA: string; // org A
let appB: string; // org A, another app
let appNoConfig: string; // org A, an app with no config yet
let appC: string; // org B
let cfgA1: string;
let cfgA2: string;
let cfgB1: string;
let cfgC1: string; // org B
let inst1: any;
let inst2: any;
let instB: any;
let instC: any;
let provisionWf: string;
let branchA: string;
let branchB: string;

beforeAll(async () => {
  svc = await startService();
  orgA = svc.createOrg('org-a');
  orgB = svc.createOrg('org-b');
  A = recording(svc.api(orgA));
  B = recording(svc.api(orgB));
  db = new Database(svc.db, { readonly: true, fileMustExist: true });

  appA = (await created(A.post('/v1/apps', { name: 'shop' }))).app_id;
  appB = (await created(A.post('/v1/apps', { name: 'other' }))).app_id;
  appNoConfig = (await created(A.post('/v1/apps', { name: 'empty' }))).app_id;
  appC = (await created(B.post('/v1/apps', { name: 'theirs' }))).app_id;
  cfgA1 = (await created(A.post(`/v1/apps/${appA}/configs`, CONFIG_1))).app_config_id;
  cfgA2 = (await created(A.post(`/v1/apps/${appA}/configs`, CONFIG_2))).app_config_id;
  cfgB1 = (await created(A.post(`/v1/apps/${appB}/configs`, { components: [{ name: 'web' }] }))).app_config_id;
  cfgC1 = (await created(B.post(`/v1/apps/${appC}/configs`, { components: [{ name: 'web' }] }))).app_config_id;

  inst1 = await created(A.post('/v1/installs', { app_id: appA, name: 'one', app_config_id: cfgA1, labels: { env: 'prod' } }));
  inst2 = await created(A.post('/v1/installs', { app_id: appA, name: 'two', app_config_id: cfgA1, labels: { env: 'dev' } }));
  instB = await created(A.post('/v1/installs', { app_id: appB, name: 'bee' }));
  instC = await created(B.post('/v1/installs', { app_id: appC, name: 'sea' }));
  const wfs = (await A.get(`/v1/installs/${inst1.install_id}/workflows`)).body;
  provisionWf = wfs[0].workflow_id;
  branchA = (
    await created(A.post(`/v1/apps/${appA}/branches`, { name: 'main', install_groups: [{ name: 'g1', install_ids: [inst1.install_id] }] }))
  ).app_branch_id;
  branchB = (
    await created(
      A.post(`/v1/apps/${appB}/branches`, { name: 'main', install_groups: [{ name: 'all', selector: { match_labels: { x: 'y' } } }] }),
    )
  ).app_branch_id;
  await settle();
  await workflowDone(A, provisionWf);
});

afterAll(async () => {
  db?.close();
  await svc?.stop();
});

// ------------------------------------------------------------------ apps

describe('POST /v1/apps', () => {
  it.each<[string, unknown, string]>([
    ['no name', {}, 'name'],
    ['empty name', { name: '' }, 'name'],
    ['blank name', { name: '   ' }, 'name'],
    ['name not a string', { name: 7 }, 'name'],
    ['name too long', { name: 'n'.repeat(201) }, 'name'],
    ['unknown field', { name: 'x', owner: 'me' }, 'owner'],
    ['an array', [{ name: 'x' }], '(body)'],
  ])('%s is 400', async (_n, body, path) => {
    await bad(() => A.post('/v1/apps', body), path);
  });

  it('malformed JSON 400, text/plain 415, empty body 400', async () => {
    await rejected(
      () => A.raw('POST', '/v1/apps', { body: '{"name":', headers: { 'content-type': 'application/json' } }),
      400,
      'invalid_request',
    );
    await rejected(
      () => A.raw('POST', '/v1/apps', { body: '{"name":"x"}', headers: { 'content-type': 'text/plain' } }),
      415,
      'unsupported_media_type',
    );
    await rejected(() => A.raw('POST', '/v1/apps'), 400, 'invalid_request');
  });

  it('happy path: 201 {app_id, name}', async () => {
    const app = await created(A.post('/v1/apps', { name: 'happy' }));
    expect(app).toMatchObject({ app_id: expect.stringMatching(/^[a-z0-9_]{1,64}$/), name: 'happy' });
  });
});

// ------------------------------------------------------------------ configs

describe('app configs', () => {
  it('unknown app and another org’s app: 404 on POST and GET', async () => {
    await notFound(() => A.post('/v1/apps/app_doesnotexist/configs', { components: [] }));
    await notFound(() => A.get('/v1/apps/app_doesnotexist/configs'));
    await notFound(() => A.post(`/v1/apps/${appC}/configs`, { components: [] }));
    await notFound(() => A.get(`/v1/apps/${appC}/configs`));
    await notFound(() => B.post(`/v1/apps/${appA}/configs`, CONFIG_1));
  });

  it.each<[string, unknown, string]>([
    ['no components', { sandbox: {} }, 'components'],
    ['components not an array', { components: { api: {} } }, 'components'],
    ['component without a name', { components: [{ type: 'helm' }] }, 'components.0.name'],
    ['component name empty', { components: [{ name: 'a' }, { name: '' }] }, 'components.1.name'],
    ['duplicate component names', { components: [{ name: 'a' }, { name: 'a' }] }, 'components.1.name'],
    ['component label not a string', { components: [{ name: 'a', labels: { tier: 1 } }] }, 'components.0.labels.tier'],
    ['component values not an object', { components: [{ name: 'a', values: 'x' }] }, 'components.0.values'],
    ['unknown component field', { components: [{ name: 'a', image: 'nginx' }] }, 'components.0.image'],
    ['sandbox not an object', { components: [], sandbox: 'big' }, 'sandbox'],
    ['actions not an array', { components: [], actions: {} }, 'actions'],
    ['action without a name', { components: [], actions: [{ inputs: {} }] }, 'actions.0.name'],
    ['duplicate action names', { components: [], actions: [{ name: 'm' }, { name: 'm' }] }, 'actions.1.name'],
    [
      'action input required not boolean',
      { components: [], actions: [{ name: 'm', inputs: { x: { required: 'yes' } } }] },
      'actions.0.inputs.x.required',
    ],
    [
      'unknown action input field',
      { components: [], actions: [{ name: 'm', inputs: { x: { optional: true } } }] },
      'actions.0.inputs.x.optional',
    ],
    ['inputs not an object', { components: [], inputs: [] }, 'inputs'],
    ['unknown top-level field', { components: [], version: 9 }, 'version'],
  ])('%s is 400', async (_n, body, path) => {
    await bad(() => A.post(`/v1/apps/${appA}/configs`, body), path);
  });

  it('happy path: 201 with the next version; GET lists newest first', async () => {
    const cfg = await created(A.post(`/v1/apps/${appB}/configs`, { components: [{ name: 'web' }, { name: 'worker' }] }));
    expect(cfg).toMatchObject({
      app_config_id: expect.any(String),
      app_id: appB,
      version: 2,
      components: [{ name: 'web' }, { name: 'worker' }],
    });
    const list = await A.get(`/v1/apps/${appB}/configs`);
    expect(list.status).toBe(200);
    expect(list.body.map((c: { version: number }) => c.version)).toEqual([2, 1]);
    expect(list.body[0].app_config_id).toBe(cfg.app_config_id);
  });
});

// ------------------------------------------------------------------ branches

describe('app branches', () => {
  it('unknown app, another org’s app: 404', async () => {
    await notFound(() => A.post('/v1/apps/app_doesnotexist/branches', { name: 'b', install_groups: [{ name: 'g', install_ids: [] }] }));
    await notFound(() => A.post(`/v1/apps/${appC}/branches`, { name: 'b', install_groups: [{ name: 'g', install_ids: [] }] }));
  });

  it('an install of another app is 400 naming it, and nothing is stored (also in a later group)', async () => {
    await bad(
      () => A.post(`/v1/apps/${appA}/branches`, { name: 'b', install_groups: [{ name: 'g', install_ids: [instB.install_id] }] }),
      'install_groups.0.install_ids.0',
    );
    await bad(
      () =>
        A.post(`/v1/apps/${appA}/branches`, {
          name: 'b',
          install_groups: [
            { name: 'first', install_ids: [inst1.install_id] },
            { name: 'second', install_ids: [inst2.install_id, instB.install_id] },
          ],
        }),
      'install_groups.1.install_ids.1',
    );
  });

  it('another org’s install is answered exactly like an install that does not exist', async () => {
    const ghost = await rejected(
      () => A.post(`/v1/apps/${appA}/branches`, { name: 'b', install_groups: [{ name: 'g', install_ids: ['inst_doesnotexist'] }] }),
      400,
      'invalid_request',
      'install_groups.0.install_ids.0',
    );
    const theirs = await rejected(
      () => A.post(`/v1/apps/${appA}/branches`, { name: 'b', install_groups: [{ name: 'g', install_ids: [instC.install_id] }] }),
      ghost.status,
      ghost.body.error,
      'install_groups.0.install_ids.0',
    );
    expect(theirs.body.details).toEqual(ghost.body.details);
  });

  it.each<[string, unknown, string]>([
    ['no name', { install_groups: [{ name: 'g', install_ids: [] }] }, 'name'],
    ['no install_groups', { name: 'b' }, 'install_groups'],
    ['empty install_groups', { name: 'b', install_groups: [] }, 'install_groups'],
    ['group with neither ids nor selector', { name: 'b', install_groups: [{ name: 'g' }] }, 'install_groups.0'],
    ['group without a name', { name: 'b', install_groups: [{ install_ids: [] }] }, 'install_groups.0.name'],
    [
      'selector with no labels',
      { name: 'b', install_groups: [{ name: 'g', selector: { match_labels: {} } }] },
      'install_groups.0.selector.match_labels',
    ],
    ['install_ids not an array', { name: 'b', install_groups: [{ name: 'g', install_ids: 'inst_1' }] }, 'install_groups.0.install_ids'],
    ['empty install id', { name: 'b', install_groups: [{ name: 'g', install_ids: [''] }] }, 'install_groups.0.install_ids.0'],
    ['unknown group field', { name: 'b', install_groups: [{ name: 'g', install_ids: [], order: 1 }] }, 'install_groups.0.order'],
  ])('%s is 400', async (_n, body, path) => {
    await bad(() => A.post(`/v1/apps/${appA}/branches`, body), path);
  });

  it('happy path: 201 {app_branch_id, ...}', async () => {
    const b = await created(
      A.post(`/v1/apps/${appA}/branches`, {
        name: 'canary',
        install_groups: [
          { name: 'prod', selector: { match_labels: { env: 'prod' } } },
          { name: 'rest', install_ids: [inst2.install_id] },
        ],
      }),
    );
    expect(b).toMatchObject({ app_branch_id: expect.stringMatching(/^[a-z0-9_]{1,64}$/), name: 'canary' });
    expect(b.install_groups.map((g: { name: string }) => g.name)).toEqual(['prod', 'rest']);
  });
});

// ------------------------------------------------------------------ installs

describe('POST /v1/installs', () => {
  it('unknown app, another org’s app: 404', async () => {
    await notFound(() => A.post('/v1/installs', { app_id: 'app_doesnotexist', name: 'x' }));
    await notFound(() => A.post('/v1/installs', { app_id: appC, name: 'x' }));
  });

  it('a config of another app is 400 on app_config_id; an unknown or another org’s config is 404', async () => {
    await bad(() => A.post('/v1/installs', { app_id: appA, name: 'x', app_config_id: cfgB1 }), 'app_config_id');
    await notFound(() => A.post('/v1/installs', { app_id: appA, name: 'x', app_config_id: 'cfg_doesnotexist' }));
    await notFound(() => A.post('/v1/installs', { app_id: appA, name: 'x', app_config_id: cfgC1 }));
  });

  it('an app with no config yet, or a branch of another app, is 400', async () => {
    await bad(() => A.post('/v1/installs', { app_id: appNoConfig, name: 'x' }), 'app_id');
    await bad(() => A.post('/v1/installs', { app_id: appA, name: 'x', app_branch_id: branchB }), 'app_branch_id');
    await bad(() => A.post('/v1/installs', { app_id: appA, name: 'x', app_branch_id: 'abr_doesnotexist' }), 'app_branch_id');
  });

  it.each<[string, unknown, string]>([
    ['no app_id', { name: 'x' }, 'app_id'],
    ['no name', { app_id: 'APP' }, 'name'],
    ['empty name', { app_id: 'APP', name: '' }, 'name'],
    ['app_id not a string', { app_id: 5, name: 'x' }, 'app_id'],
    ['label not a string', { app_id: 'APP', name: 'x', labels: { env: true } }, 'labels.env'],
    ['labels an array', { app_id: 'APP', name: 'x', labels: ['env=prod'] }, 'labels'],
    ['app_config_id too long', { app_id: 'APP', name: 'x', app_config_id: 'c'.repeat(65) }, 'app_config_id'],
    ['unknown field', { app_id: 'APP', name: 'x', region: 'eu' }, 'region'],
  ])('%s is 400', async (_n, body, path) => {
    const withApp = JSON.parse(JSON.stringify(body).replace('"APP"', JSON.stringify(appA)));
    await bad(() => A.post('/v1/installs', withApp), path);
  });

  it('happy path: 201 install of the documented shape, with a provision workflow', async () => {
    const i = await created(A.post('/v1/installs', { app_id: appA, name: 'three', labels: { env: 'qa' }, app_branch_id: branchA }));
    expect(i).toMatchObject({
      install_id: expect.stringMatching(/^[a-z0-9_]{1,64}$/),
      name: 'three',
      app_id: appA,
      labels: { env: 'qa' },
      app_config_id: expect.anything(),
      sandbox_id: expect.any(String),
      runner_id: expect.any(String),
    });
    expect(i).toHaveProperty('health');
    expect(i.components.map((c: { name: string }) => c.name)).toEqual(['api', 'db']);
    for (const c of i.components) expect(c).toMatchObject({ component_id: expect.any(String), labels: expect.any(Object) });
    expect(i.actions).toEqual([expect.objectContaining({ action_id: expect.any(String), name: 'migrate', labels: { kind: 'ops' } })]);
    const wfs = (await A.get(`/v1/installs/${i.install_id}/workflows`)).body;
    expect(wfs.map((w: { type: string }) => w.type)).toEqual(['provision']);
    await workflowDone(A, wfs[0].workflow_id);
    const got = await A.get(`/v1/installs/${i.install_id}`);
    expect(got.body.app_config_id).toBe(cfgA2); // latest config when none named
    const list = await A.get('/v1/installs');
    expect(list.status).toBe(200);
    expect(list.body.map((x: { install_id: string }) => x.install_id)).toContain(i.install_id);
    expect(list.body.map((x: { install_id: string }) => x.install_id)).not.toContain(instC.install_id);
  });
});

// ------------------------------------------------------------------ install workflows

describe('workflows on an install', () => {
  const simple = ['reprovision', 'deprovision', 'sandbox/reprovision', 'secrets/sync'];

  it('unknown install: 404 on every endpoint, nothing starts', async () => {
    const base = '/v1/installs/inst_doesnotexist';
    await notFound(() => A.get(base));
    await notFound(() => A.get(`${base}/workflows`));
    for (const p of simple) await notFound(() => A.post(`${base}/${p}`));
    await notFound(() => A.post(`${base}/components/${inst1.components[0].component_id}/deploy`));
    await notFound(() => A.post(`${base}/components/${inst1.components[0].component_id}/teardown`));
    await notFound(() => A.post(`${base}/actions/${inst1.actions[0].action_id}/runs`, { inputs: { target: 'x' } }));
    await notFound(() => A.post(`${base}/drift-scans`, {}));
    await notFound(() => A.patch(`${base}/inputs`, { inputs: { a: 1 } }));
    await notFound(() => A.get(`${base}/app-config-versions`));
    await notFound(() => A.post(`${base}/app-config-updates`, { app_config_id: cfgA2 }));
  });

  it('another org’s install: 404 on every endpoint, nothing starts', async () => {
    const base = `/v1/installs/${inst1.install_id}`;
    await notFound(() => B.get(base));
    await notFound(() => B.get(`${base}/workflows`));
    for (const p of simple) await notFound(() => B.post(`${base}/${p}`));
    await notFound(() => B.post(`${base}/components/${inst1.components[0].component_id}/deploy`));
    await notFound(() => B.post(`${base}/actions/${inst1.actions[0].action_id}/runs`, {}));
    await notFound(() => B.post(`${base}/drift-scans`, { sandbox: true }));
    await notFound(() => B.patch(`${base}/inputs`, { inputs: { a: 1 } }));
    await notFound(() => B.get(`${base}/app-config-versions`));
    await notFound(() => B.post(`${base}/app-config-updates`, { app_config_id: cfgA2, plan_only: true }));
    const list = await B.get('/v1/installs');
    expect(list.body.map((x: { install_id: string }) => x.install_id)).toEqual([instC.install_id]);
  });

  it('unknown component or action, or one of another install: 404', async () => {
    const base = `/v1/installs/${inst1.install_id}`;
    await notFound(() => A.post(`${base}/components/cmp_doesnotexist/deploy`));
    await notFound(() => A.post(`${base}/components/cmp_doesnotexist/teardown`));
    await notFound(() => A.post(`${base}/actions/act_doesnotexist/runs`, {}));
    // the component and action named the same on install two have their own ids
    expect(inst2.components[0].component_id).not.toBe(inst1.components[0].component_id);
    await notFound(() => A.post(`${base}/components/${inst2.components[0].component_id}/deploy`));
    await notFound(() => A.post(`${base}/components/${instC.components[0].component_id}/teardown`));
    await notFound(() => A.post(`${base}/actions/${inst2.actions[0].action_id}/runs`, { inputs: { target: 'x' } }));
  });

  it.each<[string, string, string, unknown, string]>([
    ['action run: inputs not an object', 'POST', 'actions/ACTION/runs', { inputs: 'x' }, 'inputs'],
    ['action run: unknown field', 'POST', 'actions/ACTION/runs', { inputs: {}, force: true }, 'force'],
    ['drift scan: sandbox not boolean', 'POST', 'drift-scans', { sandbox: 'yes' }, 'sandbox'],
    ['drift scan: unknown field', 'POST', 'drift-scans', { components: ['api'] }, 'components'],
    ['inputs: missing', 'PATCH', 'inputs', {}, 'inputs'],
    ['inputs: an array', 'PATCH', 'inputs', { inputs: [1] }, 'inputs'],
    ['inputs: a string', 'PATCH', 'inputs', { inputs: 'region=us' }, 'inputs'],
    ['inputs: unknown field', 'PATCH', 'inputs', { inputs: {}, merge: false }, 'merge'],
    ['config update: no app_config_id', 'POST', 'app-config-updates', { plan_only: true }, 'app_config_id'],
    ['config update: app_config_id not a string', 'POST', 'app-config-updates', { app_config_id: 3 }, 'app_config_id'],
    ['config update: empty app_config_id', 'POST', 'app-config-updates', { app_config_id: '' }, 'app_config_id'],
    ['config update: plan_only not boolean', 'POST', 'app-config-updates', { app_config_id: 'CFG', plan_only: 'true' }, 'plan_only'],
    ['config update: unknown field', 'POST', 'app-config-updates', { app_config_id: 'CFG', force: true }, 'force'],
  ])('%s is 400', async (_n, method, sub, body, path) => {
    const p = `/v1/installs/${inst1.install_id}/${sub.replace('ACTION', inst1.actions[0].action_id)}`;
    const b = JSON.parse(JSON.stringify(body).replace('"CFG"', JSON.stringify(cfgA2)));
    await bad(() => (method === 'POST' ? A.post(p, b) : A.patch(p, b)), path);
  });

  it('bodies that are not JSON: 400 malformed, 415 wrong type, PATCH inputs with no body 400', async () => {
    const base = `/v1/installs/${inst1.install_id}`;
    const ctJson = { 'content-type': 'application/json' };
    await rejected(() => A.raw('POST', `${base}/drift-scans`, { body: '{sandbox: true}', headers: ctJson }), 400, 'invalid_request');
    await rejected(
      () =>
        A.raw('POST', `${base}/app-config-updates`, {
          body: JSON.stringify({ app_config_id: cfgA2 }),
          headers: { 'content-type': 'text/plain' },
        }),
      415,
      'unsupported_media_type',
    );
    await rejected(
      () =>
        A.raw('POST', `${base}/app-config-updates`, {
          body: `app_config_id=${cfgA2}`,
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
        }),
      415,
      'unsupported_media_type',
    );
    await rejected(() => A.raw('PATCH', `${base}/inputs`), 400, 'invalid_request');
    await rejected(() => A.raw('POST', `${base}/app-config-updates`), 400, 'invalid_request');
  });

  it('happy paths: each endpoint returns 201 with a workflow of the documented type and steps', async () => {
    const base = `/v1/installs/${inst1.install_id}`;
    const api = inst1.components.find((c: { name: string }) => c.name === 'api');
    const cases: Array<[() => Promise<ApiResponse>, string, string[]]> = [
      [() => A.post(`${base}/reprovision`), 'reprovision', ['reprovision sandbox', 'deploy api', 'deploy db']],
      [() => A.post(`${base}/sandbox/reprovision`), 'reprovision_sandbox', ['reprovision sandbox']],
      [() => A.post(`${base}/secrets/sync`), 'sync_secrets', ['sync secrets']],
      [() => A.post(`${base}/components/${api.component_id}/deploy`), 'manual_deploy', ['deploy api']],
      [() => A.post(`${base}/components/${api.component_id}/teardown`), 'teardown_component', ['teardown api']],
      [
        () => A.post(`${base}/actions/${inst1.actions[0].action_id}/runs`, { inputs: { target: 'v2' } }),
        'action_workflow_run',
        ['run migrate'],
      ],
      [() => A.post(`${base}/drift-scans`), 'drift_run', ['plan api', 'plan db']],
      [() => A.post(`${base}/drift-scans`, { sandbox: true }), 'drift_run_reprovision_sandbox', ['plan sandbox']],
      [() => A.patch(`${base}/inputs`, { inputs: { region: 'us' } }), 'input_update', ['update inputs']],
    ];
    for (const [send, type, steps] of cases) {
      await settle();
      const r = await send();
      expect(r.status, `${type}: ${r.text}`).toBe(201);
      expect(r.body).toMatchObject({ workflow_id: expect.any(String), type, owner_id: inst1.install_id, owner_type: 'installs' });
      expect(r.body.steps.map((s: { name: string }) => s.name)).toEqual(steps);
      for (const s of r.body.steps) {
        expect(s).toMatchObject({
          step_id: expect.any(String),
          name: expect.any(String),
          idx: expect.any(Number),
          execution_type: expect.any(String),
          status: expect.any(String),
        });
      }
      await workflowDone(A, r.body.workflow_id);
    }
    const got = await A.get(`${base}`);
    expect(got.body.inputs).toMatchObject({ region: 'us' });
    // workflows newest first
    const wfs = (await A.get(`${base}/workflows`)).body;
    expect(wfs[0].type).toBe('input_update');
    expect(wfs.at(-1).type).toBe('provision');
  });

  it('an action run missing a required input still starts, and its step fails naming the input', async () => {
    const r = await A.post(`/v1/installs/${inst1.install_id}/actions/${inst1.actions[0].action_id}/runs`, {});
    expect(r.status, r.text).toBe(201);
    const wf = await workflowDone(A, r.body.workflow_id, 'failed');
    expect(wf.steps[0].status).toBe('failed');
    expect(wf.steps[0].error).toContain('target');
  });

  it('deprovision (on install two): 201, steps in reverse order', async () => {
    await settle();
    const r = await A.post(`/v1/installs/${inst2.install_id}/deprovision`);
    expect(r.status, r.text).toBe(201);
    expect(r.body.type).toBe('deprovision');
    expect(r.body.steps.map((s: { name: string }) => s.name)).toEqual(['teardown db', 'teardown api', 'deprovision sandbox']);
    await workflowDone(A, r.body.workflow_id);
  });
});

// ------------------------------------------------------------------ rollback

describe('config versions and app config updates', () => {
  it('unknown version, or a version of another install: 404', async () => {
    await notFound(() => A.get(`/v1/installs/${inst1.install_id}/app-config-versions/ver_doesnotexist/diff`));
    const v2 = (await A.get(`/v1/installs/${inst2.install_id}/app-config-versions`)).body;
    expect(v2.length).toBeGreaterThan(0);
    await notFound(() => A.get(`/v1/installs/${inst1.install_id}/app-config-versions/${v2[0].version_id}/diff`));
    const v1 = (await A.get(`/v1/installs/${inst1.install_id}/app-config-versions`)).body;
    await notFound(() => B.get(`/v1/installs/${inst1.install_id}/app-config-versions/${v1[0].version_id}/diff`));
  });

  it('a config of another app is 400; unknown or another org’s config is 404 (also with plan_only)', async () => {
    const p = `/v1/installs/${inst1.install_id}/app-config-updates`;
    await bad(() => A.post(p, { app_config_id: cfgB1 }), 'app_config_id');
    await bad(() => A.post(p, { app_config_id: cfgB1, plan_only: true }), 'app_config_id');
    await notFound(() => A.post(p, { app_config_id: 'cfg_doesnotexist' }));
    await notFound(() => A.post(p, { app_config_id: cfgC1 }));
    await notFound(() => A.post(p, { app_config_id: cfgC1, plan_only: true }));
  });

  it('plan_only: 200 {plan, applied: false}, and nothing changes', async () => {
    await settle();
    const before = storeState();
    const r = await A.post(`/v1/installs/${inst1.install_id}/app-config-updates`, { app_config_id: cfgA2, plan_only: true });
    expect(r.status, r.text).toBe(200);
    expect(r.body.applied).toBe(false);
    expect(r.body).not.toHaveProperty('workflow_id');
    expect(r.body.plan).toMatchObject({ to_app_config_id: cfgA2, changed: true, sandbox_changed: false });
    expect(r.body.plan.components.changed.map((c: { name: string }) => c.name)).toEqual(['api']);
    expect(storeState()).toEqual(before);
  });

  it('apply: 201 {plan, applied: true, workflow_id, version_id}; versions and diff have the documented shape', async () => {
    await settle();
    const r = await A.post(`/v1/installs/${inst1.install_id}/app-config-updates`, { app_config_id: cfgA2 });
    expect(r.status, r.text).toBe(201);
    expect(r.body).toMatchObject({
      applied: true,
      workflow_id: expect.any(String),
      version_id: expect.any(String),
      plan: expect.any(Object),
    });
    const wf = await workflowDone(A, r.body.workflow_id);
    expect(wf.type).toBe('app_config_update');
    expect(wf.steps.map((s: { name: string }) => s.name)).toEqual(['deploy api']);
    const versions = (await A.get(`/v1/installs/${inst1.install_id}/app-config-versions`)).body;
    expect(versions[0]).toMatchObject({
      version_id: r.body.version_id,
      install_id: inst1.install_id,
      app_config_id: cfgA2,
      old_app_config_id: cfgA1,
      workflow_id: r.body.workflow_id,
      status: 'succeeded',
      app_config: expect.objectContaining({ app_config_id: cfgA2 }),
    });
    const diff = await A.get(`/v1/installs/${inst1.install_id}/app-config-versions/${r.body.version_id}/diff`);
    expect(diff.status).toBe(200);
    expect(diff.body).toMatchObject({ version_id: r.body.version_id, from_app_config_id: cfgA1, to_app_config_id: cfgA2, changed: true });
    const names = (xs: Array<string | { name: string }>) => xs.map((x) => (typeof x === 'string' ? x : x.name));
    expect(names(diff.body.components.added)).toEqual([]);
    expect(names(diff.body.components.removed)).toEqual([]);
    expect(names(diff.body.components.unchanged)).toEqual(['db']);
    expect(diff.body.components.changed.map((c: { name: string }) => c.name)).toEqual(['api']);
  });
});

// ------------------------------------------------------------------ branch runs, approvals, cancel

describe('branch runs, approvals and cancel', () => {
  const runs = (app: string, branch: string) => `/v1/apps/${app}/branches/${branch}/runs`;

  it('unknown app or branch, a branch of another app, another org: 404', async () => {
    await notFound(() => A.post(runs('app_doesnotexist', branchA), { app_config_id: cfgA1 }));
    await notFound(() => A.post(runs(appA, 'abr_doesnotexist'), { app_config_id: cfgA1 }));
    await notFound(() => A.post(runs(appA, branchB), { app_config_id: cfgA1 }));
    await notFound(() => B.post(runs(appA, branchA), { app_config_id: cfgA1 }));
  });

  it('a config of another app is 400; unknown or another org’s config is 404', async () => {
    await bad(() => A.post(runs(appA, branchA), { app_config_id: cfgB1, skip_builds: true }), 'app_config_id');
    await notFound(() => A.post(runs(appA, branchA), { app_config_id: 'cfg_doesnotexist' }));
    await notFound(() => A.post(runs(appA, branchA), { app_config_id: cfgC1 }));
  });

  it.each<[string, unknown, string]>([
    ['no app_config_id', { skip_builds: true }, 'app_config_id'],
    ['skip_builds not boolean', { app_config_id: 'CFG', skip_builds: 'yes' }, 'skip_builds'],
    ['unknown field', { app_config_id: 'CFG', groups: ['g1'] }, 'groups'],
  ])('%s is 400', async (_n, body, path) => {
    const b = JSON.parse(JSON.stringify(body).replace('"CFG"', JSON.stringify(cfgA1)));
    await bad(() => A.post(runs(appA, branchA), b), path);
  });

  it('unknown or another org’s workflow and step: 404 on GET, approval and cancel', async () => {
    await notFound(() => A.get('/v1/workflows/wf_doesnotexist'));
    await notFound(() => A.post('/v1/workflows/wf_doesnotexist/cancel'));
    await notFound(() => A.post('/v1/workflows/wf_doesnotexist/steps/st_x/approval', { response: 'approved' }));
    await notFound(() => A.post(`/v1/workflows/${provisionWf}/steps/st_doesnotexist/approval`, { response: 'approved' }));
    await notFound(() => B.get(`/v1/workflows/${provisionWf}`));
    await notFound(() => B.post(`/v1/workflows/${provisionWf}/cancel`));
    const wf = (await A.get(`/v1/workflows/${provisionWf}`)).body;
    await notFound(() => B.post(`/v1/workflows/${provisionWf}/steps/${wf.steps[0].step_id}/approval`, { response: 'approved' }));
  });

  it('approving a step that is not awaiting approval is 409; cancelling a finished workflow is 409', async () => {
    const wf = (await A.get(`/v1/workflows/${provisionWf}`)).body;
    expect(wf.status).toBe('succeeded');
    await conflict(() => A.post(`/v1/workflows/${provisionWf}/steps/${wf.steps[0].step_id}/approval`, { response: 'approved' }));
    await conflict(() =>
      A.post(`/v1/workflows/${provisionWf}/steps/${wf.steps[1].step_id}/approval`, { response: 'rejected', note: 'no' }),
    );
    await conflict(() => A.post(`/v1/workflows/${provisionWf}/cancel`));
  });

  it('the full run: 201 {run_id, workflow_id}; bad approval bodies 400; approve 200; again 409; cancel after finish 409', async () => {
    await settle();
    const run = await A.post(runs(appA, branchA), { app_config_id: cfgA1, skip_builds: true });
    expect(run.status, run.text).toBe(201);
    expect(run.body).toMatchObject({ run_id: expect.any(String), workflow_id: expect.any(String) });
    const wfId = run.body.workflow_id;
    const plan = await stepAwaiting(A, wfId, 'plan install group: g1');
    const wf = (await A.get(`/v1/workflows/${wfId}`)).body;
    expect(wf).toMatchObject({ type: 'app_branch_run', owner_id: branchA, owner_type: 'app_branches' });
    expect(wf.steps.map((s: { name: string }) => s.name)).toEqual([
      'build components',
      'plan install group: g1',
      'deploy install group: g1',
    ]);
    expect(plan.execution_type).toBe('approval');
    expect(plan.plan.installs.map((i: { install_id: string }) => i.install_id)).toEqual([inst1.install_id]);

    const approval = `/v1/workflows/${wfId}/steps/${plan.step_id}/approval`;
    await bad(() => A.post(approval, {}), 'response');
    await bad(() => A.post(approval, { response: 'maybe' }), 'response');
    await bad(() => A.post(approval, { response: 'APPROVED' }), 'response');
    await bad(() => A.post(approval, { response: 'approved', note: 42 }), 'note');
    await bad(() => A.post(approval, { response: 'approved', note: 'n'.repeat(4001) }), 'note');
    await bad(() => A.post(approval, { response: 'approved', by: 'me' }), 'by');
    await rejected(
      () => A.raw('POST', approval, { body: 'response=approved', headers: { 'content-type': 'application/x-www-form-urlencoded' } }),
      415,
      'unsupported_media_type',
    );
    await notFound(() => B.post(approval, { response: 'approved' }));
    // the skipped build step is not awaiting approval
    await conflict(() => A.post(`/v1/workflows/${wfId}/steps/${wf.steps[0].step_id}/approval`, { response: 'approved' }));
    // nor is the deploy step that has not started
    await conflict(() => A.post(`/v1/workflows/${wfId}/steps/${wf.steps[2].step_id}/approval`, { response: 'approved' }));

    const ok = await A.post(approval, { response: 'approved', note: 'ship it' });
    expect(ok.status, ok.text).toBe(200);
    expect(ok.body).toMatchObject({
      step_id: plan.step_id,
      name: 'plan install group: g1',
      approval: expect.objectContaining({ status: 'approved', note: 'ship it' }),
    });
    await conflict(() => A.post(approval, { response: 'approved' }));
    await conflict(() => A.post(approval, { response: 'rejected' }));
    await workflowDone(A, wfId);
    await conflict(() => A.post(`/v1/workflows/${wfId}/cancel`));
  });

  it('cancel: 200 with the workflow cancelled; cancelling it again is 409; approving its step is 409', async () => {
    await settle();
    const run = await A.post(runs(appA, branchA), { app_config_id: cfgA2, skip_builds: true });
    expect(run.status, run.text).toBe(201);
    const wfId = run.body.workflow_id;
    const plan = await stepAwaiting(A, wfId, 'plan install group: g1');
    const c = await A.post(`/v1/workflows/${wfId}/cancel`);
    expect(c.status, c.text).toBe(200);
    expect(c.body).toMatchObject({ workflow_id: wfId, type: 'app_branch_run', status: 'cancelled' });
    expect(c.body.steps.every((s: { status: string }) => TERMINAL.includes(s.status))).toBe(true);
    await conflict(() => A.post(`/v1/workflows/${wfId}/cancel`));
    await conflict(() => A.post(`/v1/workflows/${wfId}/steps/${plan.step_id}/approval`, { response: 'approved' }));
  });
});

describe('never a 500', () => {
  it('no response in this file was a 5xx', () => {
    expect(statuses.length).toBeGreaterThan(100);
    const bad5 = statuses.filter((r) => r.status >= 500);
    expect(bad5, JSON.stringify(bad5.slice(0, 3))).toEqual([]);
  });
});
