// The size limits of CONTRACT 8, through a real svc (in process, real HTTP, a real SQLite file):
// each row of the limits table just under (accepted) and just over (400 invalid_request naming the
// path, nothing stored); webhooks per org with the option set low (409 limit_exceeded, another org
// unaffected, the dashboard form shows it); and data stored before the limits (planted directly
// in SQLite) that still reads, patches and delivers.
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startService, waitFor, type ApiClient, type ApiResponse, type OrgCreds, type TestService } from '../helpers/service.ts';
import { startReceiver, type Receiver } from '../helpers/receiver.ts';
import { dashboardSession } from '../helpers/dashboard.ts';

const HOOKS = '/v1/orgs/current/webhooks';

/** `n` labels `k0..k{n-1}` = `v`. */
const labelsOf = (n: number, value = 'v'): Record<string, string> =>
  Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, value]));
const ids = (n: number, prefix = 'inst_') => Array.from({ length: n }, (_, i) => `${prefix}${i}`);
/** What CONTRACT 8 measures: interests + match as JSON, in UTF-8 bytes. */
const subscriptionBytes = (body: { interests?: unknown; match?: unknown }) =>
  Buffer.byteLength(JSON.stringify({ interests: body.interests, match: body.match }));

function detailPaths(r: ApiResponse): string[] {
  return Array.isArray(r.body?.details) ? r.body.details.map((d: { path: string }) => d.path) : [];
}

function expect400(r: ApiResponse, path: string) {
  expect(r.status, r.text.slice(0, 500)).toBe(400);
  expect(r.body.error).toBe('invalid_request');
  expect(typeof r.body.message).toBe('string');
  expect(detailPaths(r), r.text.slice(0, 500)).toContain(path);
}

describe('the limits table (CONTRACT 8)', () => {
  let svc: TestService;
  let org: OrgCreds;
  let api: ApiClient;
  let db: Database.Database;
  let appId: string;
  let cfgId: string;

  /** Every row of the tables a refused request could have written. */
  const stored = () =>
    Object.fromEntries(
      ['webhooks', 'app_configs', 'app_branches', 'installs', 'install_components', 'install_actions', 'workflows'].map((t) => [
        t,
        db.prepare(`SELECT * FROM ${t} ORDER BY rowid`).all(),
      ]),
    );

  /** Send; expect 400 naming `path` and no row written anywhere. */
  async function refused(send: () => Promise<ApiResponse>, path: string) {
    const before = stored();
    const r = await send();
    expect400(r, path);
    expect(stored()).toEqual(before);
    return r;
  }

  async function accepted(send: () => Promise<ApiResponse>) {
    const r = await send();
    expect(r.status, r.text.slice(0, 500)).toBe(201);
    return r.body;
  }

  beforeAll(async () => {
    svc = await startService({ localRunner: false }); // workflows wait for a runner: nothing runs behind the tests
    org = svc.createOrg('limits');
    api = svc.api(org);
    db = new Database(svc.db, { readonly: true, fileMustExist: true });
    appId = (await accepted(() => api.post('/v1/apps', { name: 'shop' }))).app_id;
    cfgId = (await accepted(() => api.post(`/v1/apps/${appId}/configs`, { components: [{ name: 'api' }] }))).app_config_id;
  });

  afterAll(async () => {
    db?.close();
    await svc?.stop();
  });

  // [what, labels just under (accepted), labels just over, the path the error names (relative to the labels)]
  const LABEL_ROWS: Array<[string, Record<string, string>, Record<string, string>, string]> = [
    ['64 labels, not 65', labelsOf(64), labelsOf(65), ''],
    ['a key of 128 characters, not 129', { ['k'.repeat(128)]: 'v' }, { ['k'.repeat(129)]: 'v' }, `.${'k'.repeat(129)}`],
    ['a key of 1 character, not an empty one', { k: 'v' }, { '': 'v' }, '.'],
    ['a key with a space in it, not a blank one', { 'a b': 'v' }, { '   ': 'v' }, '.   '],
    ['a key with printable characters, not a control character', { 'a.b/c-d_é': 'v' }, { 'a\u0007b': 'v' }, '.a\u0007b'],
    ['no C1 control character either', { k: 'v' }, { 'a\u0085b': 'v' }, '.a\u0085b'],
    ['a value of 63 characters, not 64', { k: 'x'.repeat(63) }, { k: 'x'.repeat(64) }, '.k'],
    ['a value of 63 non-ASCII characters, not 64', { k: 'é'.repeat(63) }, { k: 'é'.repeat(64) }, '.k'],
  ];

  let n = 0; // unique names and URLs across the rows
  describe.each(LABEL_ROWS)('labels: %s', (_what, under, over, rel) => {
    const config = (labels: Record<string, string>, where: 'components' | 'actions') =>
      where === 'components'
        ? { components: [{ name: 'api', labels }] }
        : { components: [{ name: 'api' }], actions: [{ name: 'migrate', labels }] };

    it('on a component of an app config', async () => {
      await accepted(() => api.post(`/v1/apps/${appId}/configs`, config(under, 'components')));
      await refused(() => api.post(`/v1/apps/${appId}/configs`, config(over, 'components')), `components.0.labels${rel}`);
    });

    it('on an action of an app config', async () => {
      await accepted(() => api.post(`/v1/apps/${appId}/configs`, config(under, 'actions')));
      await refused(() => api.post(`/v1/apps/${appId}/configs`, config(over, 'actions')), `actions.0.labels${rel}`);
    });

    it('on an install', async () => {
      const i = await accepted(() =>
        api.post('/v1/installs', { app_id: appId, app_config_id: cfgId, name: `under-${++n}`, labels: under }),
      );
      expect(i.labels).toEqual(under);
      await refused(
        () => api.post('/v1/installs', { app_id: appId, app_config_id: cfgId, name: `over-${n}`, labels: over }),
        `labels${rel}`,
      );
    });

    it("in a branch group's selector", async () => {
      const branch = (labels: Record<string, string>) => ({
        name: `b${++n}`,
        install_groups: [{ name: 'g', selector: { match_labels: labels } }],
      });
      await accepted(() => api.post(`/v1/apps/${appId}/branches`, branch(under)));
      await refused(() => api.post(`/v1/apps/${appId}/branches`, branch(over)), `install_groups.0.selector.match_labels${rel}`);
    });

    it("in a webhook match's selector (create and PATCH)", async () => {
      const match = (labels: Record<string, string>) => ({ components: { selector: { match_labels: labels } } });
      const w = await accepted(() => api.post(HOOKS, { webhook_url: `https://hooks.example.com/labels/${++n}`, match: match(under) }));
      expect(w.match).toEqual(match(under));
      const path = `match.components.selector.match_labels${rel}`;
      await refused(() => api.post(HOOKS, { webhook_url: `https://hooks.example.com/labels-over/${n}`, match: match(over) }), path);
      await refused(() => api.patch(`${HOOKS}/${w.webhook_id}`, { match: match(over) }), path);
    });
  });

  it('a label value must be a string', async () => {
    await refused(() => api.post('/v1/installs', { app_id: appId, app_config_id: cfgId, name: 'num', labels: { k: 1 } }), 'labels.k');
  });

  it('ids in one kind of match: 1,000, not 1,001 (each kind on its own)', async () => {
    // short ids: 1,000 real ids (25 characters) would be over the 16 KiB of the whole subscription first
    const many = { installs: { ids: ids(1000, 'i') }, components: { ids: ids(1000, 'c') } };
    const w = await accepted(() => api.post(HOOKS, { webhook_url: 'https://hooks.example.com/ids', match: many }));
    expect(w.match.installs.ids).toHaveLength(1000);
    const over = { installs: { ids: ids(1000, 'i') }, components: { ids: ids(1001, 'c') } };
    const r = await refused(
      () => api.post(HOOKS, { webhook_url: 'https://hooks.example.com/ids-over', match: over }),
      'match.components.ids',
    );
    expect(detailPaths(r)).not.toContain('match.installs.ids');
    await refused(() => api.patch(`${HOOKS}/${w.webhook_id}`, { match: over }), 'match.components.ids');
  });

  /** A body whose subscription is exactly `bytes` long: one match id padded to fit. */
  function subscriptionOf(bytes: number) {
    const interests = { all_events: true };
    const match = (pad: number) => ({ installs: { ids: ['x'.repeat(pad)] } });
    const pad = bytes - subscriptionBytes({ interests, match: match(0) });
    const body = { interests, match: match(pad) };
    expect(subscriptionBytes(body)).toBe(bytes);
    return body;
  }

  it('one subscription (interests + match as JSON): 16 KiB, not a byte more (create and PATCH)', async () => {
    const w = await accepted(() => api.post(HOOKS, { webhook_url: 'https://hooks.example.com/size', ...subscriptionOf(16 * 1024) }));
    await refused(() => api.post(HOOKS, { webhook_url: 'https://hooks.example.com/size-over', ...subscriptionOf(16 * 1024 + 1) }), 'match');
    await refused(() => api.patch(`${HOOKS}/${w.webhook_id}`, subscriptionOf(16 * 1024 + 1)), 'match');
    // multi-byte characters count as their UTF-8 bytes: 6,000 × 'é' is 12,000 bytes, 9,000 × 'é' is 18,000
    const wide = (n: number) => ({ match: { installs: { ids: ['é'.repeat(n)] } } });
    await accepted(() => api.post(HOOKS, { webhook_url: 'https://hooks.example.com/size-wide', ...wide(6000) }));
    await refused(() => api.post(HOOKS, { webhook_url: 'https://hooks.example.com/size-wide-over', ...wide(9000) }), 'match');
  });

  it('an oversized subscription names interests when they are the larger part', async () => {
    const interests = { resources: { components: { ops: Array.from({ length: 2000 }, () => 'deploy') } } };
    expect(subscriptionBytes({ interests })).toBeGreaterThan(16 * 1024);
    await refused(() => api.post(HOOKS, { webhook_url: 'https://hooks.example.com/big-interests', interests }), 'interests');
  });

  it('the OpenAPI document shows the limits on the request bodies', async () => {
    const doc = (await api.get('/v1/openapi.json')).body;
    const body = (path: string, method = 'post') => doc.paths[path][method].requestBody.content['application/json'].schema;
    const labels = body('/v1/installs').properties.labels;
    expect(labels).toMatchObject({
      maxProperties: 64,
      propertyNames: { minLength: 1, maxLength: 128 },
      additionalProperties: { maxLength: 63 },
    });
    const hook = body(HOOKS);
    expect(hook.description).toMatch(/16 KiB/);
    expect(JSON.stringify(hook.properties.match)).toContain('"maxItems":1000');
  });
});

describe('webhooks per org (CONTRACT 8, --max-webhooks-per-org)', () => {
  const MAX = 3;
  let svc: TestService;
  let orgA: OrgCreds;
  let orgB: OrgCreds;
  let A: ApiClient;
  let B: ApiClient;
  let db: Database.Database;
  let seq = 0;

  const count = (orgId: string) => (db.prepare('SELECT COUNT(*) AS n FROM webhooks WHERE org_id = ?').get(orgId) as { n: number }).n;
  const create = (api: ApiClient) => api.post(HOOKS, { webhook_url: `https://hooks.example.com/per-org/${++seq}` });

  beforeAll(async () => {
    svc = await startService({ maxWebhooksPerOrg: MAX });
    orgA = svc.createOrg('org-a');
    orgB = svc.createOrg('org-b');
    A = svc.api(orgA);
    B = svc.api(orgB);
    db = new Database(svc.db, { readonly: true, fileMustExist: true });
  });

  afterAll(async () => {
    db?.close();
    await svc?.stop();
  });

  it('the next one past the limit is 409 limit_exceeded naming the limit; another org still creates; a delete makes room', async () => {
    const made: string[] = [];
    for (let i = 0; i < MAX; i++) {
      const r = await create(A);
      expect(r.status, r.text).toBe(201);
      made.push(r.body.webhook_id);
    }
    const over = await create(A);
    expect(over.status, over.text).toBe(409);
    expect(Object.keys(over.body).sort()).toEqual(['error', 'message']);
    expect(over.body.error).toBe('limit_exceeded');
    expect(over.body.message).toMatch(/webhooks per org/);
    expect(over.body.message).toContain(String(MAX));
    expect(count(orgA.org_id)).toBe(MAX);

    // org B is not held back by org A being full
    for (let i = 0; i < MAX; i++) expect((await create(B)).status).toBe(201);
    expect((await create(B)).body.error).toBe('limit_exceeded');
    expect(count(orgB.org_id)).toBe(MAX);

    // PATCH changes a webhook, it does not add one
    const patched = await A.patch(`${HOOKS}/${made[0]}`, { secret: 'rotated-secret' });
    expect(patched.status, patched.text).toBe(200);

    expect((await A.del(`${HOOKS}/${made[0]}`)).status).toBe(204);
    expect((await create(A)).status).toBe(201);
    expect((await create(A)).status).toBe(409);
    expect(count(orgA.org_id)).toBe(MAX);
  });

  it('creates racing at the limit: exactly the room left is taken', async () => {
    const orgC = svc.createOrg('org-c');
    const C = svc.api(orgC);
    const rs = await Promise.all(Array.from({ length: MAX + 4 }, () => create(C)));
    expect(rs.filter((r) => r.status === 201)).toHaveLength(MAX);
    expect(rs.filter((r) => r.status === 409 && r.body.error === 'limit_exceeded')).toHaveLength(4);
    expect(count(orgC.org_id)).toBe(MAX);
  });

  it('the dashboard form answers with the limit instead of failing', async () => {
    const orgD = svc.createOrg('org-d');
    const D = svc.api(orgD);
    for (let i = 0; i < MAX; i++) expect((await create(D)).status).toBe(201);
    const dash = await dashboardSession(`${svc.url}/dashboard`, orgD);
    const res = await dash.submit(`/${orgD.org_id}/webhooks/new`, `/${orgD.org_id}/webhooks`, {
      webhook_url: 'https://hooks.example.com/from-the-form',
      all_events: '1',
    });
    expect(res.status).toBe(409);
    const html = await res.text();
    expect(html).toContain('role="alert"');
    expect(html).toMatch(/webhooks per org/);
    expect(html).toContain('https://hooks.example.com/from-the-form'); // the form is shown again as filled in
    expect(count(orgD.org_id)).toBe(MAX);
  });
});

describe('data stored before the limits', () => {
  let svc: TestService;
  let org: OrgCreds;
  let api: ApiClient;
  let rx: Receiver;
  let db: Database.Database;

  const bigLabels = () => Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`${'key'.repeat(60)}-${i}`, 'v'.repeat(200)]));

  beforeAll(async () => {
    [svc, rx] = await Promise.all([startService(), startReceiver()]);
    org = svc.createOrg('old-data');
    api = svc.api(org);
    db = new Database(svc.db, { fileMustExist: true });
    db.pragma('busy_timeout = 5000');
  });

  afterAll(async () => {
    db?.close();
    await rx?.close();
    await svc?.stop();
  });

  it('an oversized webhook reads, pings, and PATCHes its secret; only a new subscription is held to the limits', async () => {
    const match = {
      components: { ids: ids(5000, 'cmp_old_') },
      installs: { selector: { match_labels: bigLabels() } },
    };
    expect(subscriptionBytes({ interests: { all_events: true }, match })).toBeGreaterThan(16 * 1024);
    const now = new Date().toISOString();
    const id = 'wh_planted_before_limits';
    db.prepare(
      `INSERT INTO webhooks (webhook_id, org_id, url, secret, interests, match, match_canonical, created_at, updated_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ).run(id, org.org_id, rx.hook('old'), 'old-secret', JSON.stringify({ all_events: true }), JSON.stringify(match), 'planted', now, now);

    const got = await api.get(`${HOOKS}/${id}`);
    expect(got.status, got.text.slice(0, 500)).toBe(200);
    expect(got.body.match.components.ids).toHaveLength(5000);
    expect(Object.keys(got.body.match.installs.selector.match_labels)).toHaveLength(100);
    const list = await api.get(HOOKS);
    expect(list.status).toBe(200);
    expect(list.body.map((w: any) => w.webhook_id)).toContain(id);

    const ping = await api.post(`${HOOKS}/${id}/ping`);
    expect(ping.status, ping.text).toBe(200);
    expect(ping.body.delivered).toBe(true);
    expect(rx.at('old')).toHaveLength(1);

    const rotated = await api.patch(`${HOOKS}/${id}`, { secret: 'new-secret' });
    expect(rotated.status, rotated.text.slice(0, 500)).toBe(200);
    expect(rotated.body.match.components.ids).toHaveLength(5000);

    // a PATCH that names the subscription is a new write: within the limits, or refused
    expect400(await api.patch(`${HOOKS}/${id}`, { match }), 'match.components.ids');
    const shrunk = await api.patch(`${HOOKS}/${id}`, { match: { components: { ids: ['cmp_old_1'] } } });
    expect(shrunk.status, shrunk.text).toBe(200);
  });

  it('an install, its components and its app config with oversized labels read, and its events are delivered', async () => {
    const app = (await api.post('/v1/apps', { name: 'old' })).body;
    const cfg = (await api.post(`/v1/apps/${app.app_id}/configs`, { components: [{ name: 'api' }], actions: [{ name: 'migrate' }] })).body;
    const made = await api.post('/v1/installs', { app_id: app.app_id, name: 'old', app_config_id: cfg.app_config_id });
    expect(made.status, made.text).toBe(201);
    const installId = made.body.install_id;
    await waitFor(
      async () => (await api.get(`/v1/installs/${installId}/app-config-versions`)).body?.[0]?.status === 'succeeded',
      15_000,
      'provisioned',
    );

    const labels = JSON.stringify(bigLabels());
    db.prepare('UPDATE installs SET labels = ? WHERE install_id = ?').run(labels, installId);
    db.prepare('UPDATE install_components SET labels = ? WHERE install_id = ?').run(labels, installId);
    db.prepare('UPDATE install_actions SET labels = ? WHERE install_id = ?').run(labels, installId);
    const body = { components: [{ name: 'api', labels: bigLabels() }], actions: [{ name: 'migrate', labels: bigLabels() }] };
    db.prepare('UPDATE app_configs SET body = ? WHERE app_config_id = ?').run(JSON.stringify(body), cfg.app_config_id);

    const got = await api.get(`/v1/installs/${installId}`);
    expect(got.status, got.text.slice(0, 500)).toBe(200);
    expect(Object.keys(got.body.labels)).toHaveLength(100);
    expect(Object.keys(got.body.components[0].labels)).toHaveLength(100);
    expect(Object.keys(got.body.actions[0].labels)).toHaveLength(100);
    expect((await api.get('/v1/installs')).status).toBe(200);
    const configs = await api.get(`/v1/apps/${app.app_id}/configs`);
    expect(configs.status, configs.text.slice(0, 500)).toBe(200);
    expect(Object.keys(configs.body[0].components[0].labels)).toHaveLength(100);
    const versions = await api.get(`/v1/installs/${installId}/app-config-versions`);
    expect(versions.status, versions.text.slice(0, 500)).toBe(200);

    // a new install from that config would write its labels anew: refused, nothing stored
    const installs = () => db.prepare('SELECT install_id FROM installs ORDER BY rowid').all();
    const before = installs();
    const fresh = await api.post('/v1/installs', { app_id: app.app_id, name: 'new-from-old', app_config_id: cfg.app_config_id });
    expect400(fresh, 'app_config_id');
    expect(fresh.body.message).toMatch(/components\.0\.labels, actions\.0\.labels/);
    expect(installs()).toEqual(before);

    // an event about the install is still delivered
    const hook = await api.post(HOOKS, { webhook_url: rx.hook('install'), match: { installs: { ids: [installId] } } });
    expect(hook.status, hook.text).toBe(201);
    const wf = await api.post(`/v1/installs/${installId}/reprovision`);
    expect(wf.status, wf.text).toBe(201);
    const wfId = wf.body.workflow_id;
    await waitFor(
      () => rx.at('install').some((d) => String(d.json?.subject).includes(`/workflow/${wfId}/succeeded`)),
      15_000,
      'the reprovision of the old install, delivered',
    );
  });
});
