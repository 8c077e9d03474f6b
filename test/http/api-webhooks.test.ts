// Our own integration tests of the webhook HTTP API's bad-input handling (CONTRACT 2, 3, 4.1):
// a real svc in process, real HTTP, a real SQLite file that we read (read-only) to prove that a
// rejected request changed nothing.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import Database from 'better-sqlite3';
import http from 'node:http';
import { openDb } from '../../store/db.ts';
import { createToken, revokeToken } from '../../store/orgs.ts';
import { apiClient, startService, type ApiClient, type ApiResponse, type OrgCreds, type TestService } from '../helpers/service.ts';

const HOOKS = '/v1/orgs/current/webhooks';
const MiB = 1024 * 1024;

let svc: TestService;
let db: Database.Database;
let orgA: OrgCreds;
let orgB: OrgCreds;
let A: ApiClient;
let B: ApiClient;
/** every response this file received, for the "never a 500" and "no secret leaks" checks */
const responses: Array<{ what: string; status: number; text: string }> = [];
/** every secret this file ever sent */
const secretsSent = new Set<string>();

/** An ApiClient that records each response (and each secret it sends). */
function recording(client: ApiClient): ApiClient {
  const rec = async <T>(what: string, p: Promise<ApiResponse<T>>) => {
    const r = await p;
    responses.push({ what, status: r.status, text: r.text });
    return r;
  };
  const noteSecret = (body: unknown) => {
    if (body && typeof body === 'object' && typeof (body as { secret?: unknown }).secret === 'string') {
      secretsSent.add((body as { secret: string }).secret);
    }
  };
  return {
    get: (p) => rec(`GET ${p}`, client.get(p)),
    post: (p, body) => (noteSecret(body), rec(`POST ${p}`, client.post(p, body))),
    patch: (p, body) => (noteSecret(body), rec(`PATCH ${p}`, client.patch(p, body))),
    del: (p) => rec(`DELETE ${p}`, client.del(p)),
    raw: (method, p, init) => rec(`${method} ${p}`, client.raw(method, p, init)),
  };
}

const json = { 'content-type': 'application/json' };

/** Full contents of the webhooks table (every column), in a stable order. */
function webhookRows(): unknown[] {
  return db.prepare('SELECT * FROM webhooks ORDER BY webhook_id').all();
}

function webhookCount(): number {
  return (db.prepare('SELECT COUNT(*) AS n FROM webhooks').get() as { n: number }).n;
}

function detailPaths(r: ApiResponse): string[] {
  return Array.isArray(r.body?.details) ? r.body.details.map((d: { path: string }) => d.path) : [];
}

function expectErrorShape(r: ApiResponse, status: number, code: string) {
  expect(r.status, `${status} expected, got ${r.status}: ${r.text}`).toBe(status);
  expect(r.body, r.text).toBeTypeOf('object');
  expect(r.body.error).toBe(code);
  expect(typeof r.body.message).toBe('string');
  expect(r.body.message.length).toBeGreaterThan(0);
  const allowed = new Set(['error', 'message', 'details']);
  for (const k of Object.keys(r.body)) expect(allowed.has(k), `unexpected key ${k} in error body`).toBe(true);
  if (r.body.details !== undefined) {
    expect(Array.isArray(r.body.details)).toBe(true);
    for (const d of r.body.details) {
      expect(typeof d.path).toBe('string');
      expect(typeof d.message).toBe('string');
    }
  }
}

/** Send, expect 400 invalid_request whose details name `path`, and that the table did not change. */
async function expectRejected(send: () => Promise<ApiResponse>, path: string) {
  const before = webhookRows();
  const r = await send();
  expectErrorShape(r, 400, 'invalid_request');
  expect(detailPaths(r), r.text).toContain(path);
  expect(webhookRows()).toEqual(before);
  return r;
}

async function expectUnchangedStatus(send: () => Promise<ApiResponse>, status: number, code: string) {
  const before = webhookRows();
  const r = await send();
  expectErrorShape(r, status, code);
  expect(webhookRows()).toEqual(before);
  return r;
}

let urlSeq = 0;
/** A fresh, never-registered URL: if a bad body were accepted it would create a row (not a 409). */
const freshUrl = () => `https://hooks.example.com/fresh/${++urlSeq}`;

// Seeded webhooks of org A (and B)
let W_PLAIN: { webhook_id: string; webhook_url: string };
let W_SCOPED: { webhook_id: string; webhook_url: string };
let W_B: { webhook_id: string };
const SHARED_URL = 'https://hooks.example.com/shared';
const SCOPED_MATCH = {
  installs: { ids: ['inst_b', 'inst_a'] },
  components: { selector: { match_labels: { tier: 'web', env: 'prod' } } },
};

beforeAll(async () => {
  svc = await startService();
  orgA = svc.createOrg('org-a');
  orgB = svc.createOrg('org-b');
  A = recording(svc.api(orgA));
  B = recording(svc.api(orgB));
  db = new Database(svc.db, { readonly: true, fileMustExist: true });

  const plain = await A.post(HOOKS, { webhook_url: SHARED_URL, secret: 'seed-secret-plain-0001' });
  expect(plain.status, plain.text).toBe(201);
  W_PLAIN = plain.body;
  const scoped = await A.post(HOOKS, { webhook_url: SHARED_URL, secret: 'seed-secret-scoped-0002', match: SCOPED_MATCH });
  expect(scoped.status, scoped.text).toBe(201);
  W_SCOPED = scoped.body;
  const b = await B.post(HOOKS, { webhook_url: 'https://hooks.example.com/b', secret: 'seed-secret-orgb-0003' });
  expect(b.status, b.text).toBe(201);
  W_B = b.body;
});

afterAll(async () => {
  db?.close();
  await svc?.stop();
});

// ------------------------------------------------------------------ validation tables

/** Bad `interests` documents and the field path the error must name. */
const BAD_INTERESTS: Array<[string, unknown, string]> = [
  ['a string', 'all', 'interests'],
  ['an array', [{ all_events: true }], 'interests'],
  ['empty object (selects nothing)', {}, 'interests'],
  ['all_events false alone', { all_events: false }, 'interests.all_events'],
  ['all_events not boolean', { all_events: 'true' }, 'interests.all_events'],
  ['empty resources', { resources: {} }, 'interests.resources'],
  ['resources null', { resources: null }, 'interests.resources'],
  ['resources an array', { resources: ['installs'] }, 'interests.resources'],
  ['all_events true with resources (ambiguous)', { all_events: true, resources: { installs: {} } }, 'interests.resources'],
  ['unknown interests key', { all_events: true, everything: true }, 'interests.everything'],
  ['unknown resource', { resources: { widgets: {} } }, 'interests.resources.widgets'],
  ['resource config null', { resources: { installs: null } }, 'interests.resources.installs'],
  ['resource config a string', { resources: { installs: 'all' } }, 'interests.resources.installs'],
  ['op of another resource', { resources: { installs: { ops: ['deploy'] } } }, 'interests.resources.installs.ops.0'],
  ['second op unknown', { resources: { runners: { ops: ['unhealthy', 'explode'] } } }, 'interests.resources.runners.ops.1'],
  ['ops a string', { resources: { components: { ops: 'deploy' } } }, 'interests.resources.components.ops'],
  ['drift ops are not ops', { resources: { components: { ops: ['drift'] } } }, 'interests.resources.components.ops.0'],
  ['app_branches op other than run', { resources: { app_branches: { ops: ['deploy'] } } }, 'interests.resources.app_branches.ops.0'],
  ['unknown outcome', { resources: { installs: { outcome: 'some' } } }, 'interests.resources.installs.outcome'],
  ['outcome not a string', { resources: { installs: { outcome: 1 } } }, 'interests.resources.installs.outcome'],
  [
    'approval_requests not boolean',
    { resources: { installs: { approval_requests: 'yes' } } },
    'interests.resources.installs.approval_requests',
  ],
  [
    'approval_responses not boolean',
    { resources: { installs: { approval_responses: 1 } } },
    'interests.resources.installs.approval_responses',
  ],
  ['drift_detected true on installs', { resources: { installs: { drift_detected: true } } }, 'interests.resources.installs.drift_detected'],
  ['drift_detected true on runners', { resources: { runners: { drift_detected: true } } }, 'interests.resources.runners.drift_detected'],
  [
    'component_health true on sandboxes',
    { resources: { sandboxes: { component_health: true } } },
    'interests.resources.sandboxes.component_health',
  ],
  [
    'install_degraded true on components',
    { resources: { components: { install_degraded: true } } },
    'interests.resources.components.install_degraded',
  ],
  [
    'drift_detected not boolean',
    { resources: { components: { drift_detected: 'true' } } },
    'interests.resources.components.drift_detected',
  ],
  ['unknown per-resource field', { resources: { installs: { notify: true } } }, 'interests.resources.installs.notify'],
];

/** Bad `match` documents and the field path the error must name. */
const BAD_MATCH: Array<[string, unknown, string]> = [
  ['a string', 'org', 'match'],
  ['an array', [{ installs: {} }], 'match'],
  ['empty object', {}, 'match'],
  ['unknown kind', { runners: {} }, 'match.runners'],
  ['kind null', { installs: null }, 'match.installs'],
  ['kind a string', { installs: 'inst_1' }, 'match.installs'],
  ['empty ids', { installs: { ids: [] } }, 'match.installs.ids'],
  ['ids a string', { installs: { ids: 'inst_1' } }, 'match.installs.ids'],
  ['empty-string id', { components: { ids: ['cmp_1', ''] } }, 'match.components.ids.1'],
  ['non-string id', { actions: { ids: [7] } }, 'match.actions.ids.0'],
  ['selector without match_labels', { installs: { selector: {} } }, 'match.installs.selector.match_labels'],
  ['selector with no labels', { components: { selector: { match_labels: {} } } }, 'match.components.selector.match_labels'],
  ['label value not a string', { actions: { selector: { match_labels: { env: 1 } } } }, 'match.actions.selector.match_labels.env'],
  ['selector a string', { installs: { selector: 'env=prod' } }, 'match.installs.selector'],
  [
    'unknown selector field',
    { installs: { selector: { match_labels: { a: 'b' }, match_expressions: [] } } },
    'match.installs.selector.match_expressions',
  ],
  ['unknown filter field', { installs: { names: ['a'] } }, 'match.installs.names'],
];

const LONG_HOST = 'https://hooks.example.com/';

/** Bad webhook_url values (create) and bad secrets. */
const BAD_URLS: Array<[string, unknown]> = [
  ['number', 42],
  ['null', null],
  ['object', { href: 'https://hooks.example.com/' }],
  ['empty string', ''],
  ['ftp scheme', 'ftp://hooks.example.com/x'],
  ['mailto', 'mailto:ops@example.com'],
  ['javascript', 'javascript:alert(1)'],
  ['no scheme', 'hooks.example.com/x'],
  ['relative path', '/hooks/x'],
  ['scheme only', 'http://'],
  ['no host', 'http:///path'],
  ['https no host', 'https://?q=1'],
  ['space in host', 'https://hooks example.com/'],
  ['control character', 'https://hooks.example.com/\u0000x'],
  ['not a URL', 'not a url'],
  ['2049 characters', LONG_HOST + 'a'.repeat(2049 - LONG_HOST.length)],
];

describe('create: every validation rule is 400 naming the field, and nothing is stored', () => {
  it('a missing webhook_url', async () => {
    await expectRejected(() => A.post(HOOKS, {}), 'webhook_url');
    await expectRejected(() => A.post(HOOKS, { secret: 'abc', interests: { all_events: true } }), 'webhook_url');
  });

  it.each(BAD_URLS)('webhook_url: %s', async (_name, url) => {
    await expectRejected(() => A.post(HOOKS, { webhook_url: url }), 'webhook_url');
  });

  it.each<[string, unknown]>([
    ['empty', ''],
    ['513 characters', 's'.repeat(513)],
    ['a number', 12345],
    ['an object', { value: 'x' }],
  ])('secret: %s', async (_name, secret) => {
    await expectRejected(() => A.post(HOOKS, { webhook_url: freshUrl(), secret }), 'secret');
  });

  it.each(BAD_INTERESTS)('interests: %s', async (_name, interests, path) => {
    await expectRejected(() => A.post(HOOKS, { webhook_url: freshUrl(), interests }), path);
  });

  it.each(BAD_MATCH)('match: %s', async (_name, match, path) => {
    await expectRejected(() => A.post(HOOKS, { webhook_url: freshUrl(), match }), path);
  });

  it.each<[string, Record<string, unknown>, string]>([
    ['url instead of webhook_url', { url: 'https://hooks.example.com/u' }, 'url'],
    ['subscription wrapper', { subscription: { interests: { all_events: true } } }, 'subscription'],
    ['has_secret', { has_secret: true }, 'has_secret'],
    ['webhook_id', { webhook_id: 'wh_mine' }, 'webhook_id'],
    ['created_at', { created_at: '2020-01-01T00:00:00Z' }, 'created_at'],
  ])('an unknown field (%s) is 400 naming it', async (_name, extra, path) => {
    await expectRejected(() => A.post(HOOKS, { webhook_url: freshUrl(), ...extra }), path);
  });

  it('a __proto__ key is an unknown field, not a prototype change', async () => {
    const body = `{"webhook_url":"${freshUrl()}","__proto__":{"secret":"polluted-secret"}}`;
    const r = await expectRejected(() => A.raw('POST', HOOKS, { body, headers: json }), '__proto__');
    expect(r.text).not.toContain('polluted-secret');
  });

  it('several bad fields are each named', async () => {
    const r = await expectRejected(() => A.post(HOOKS, { webhook_url: 'ftp://x', secret: '', bogus: 1 }), 'webhook_url');
    expect(detailPaths(r)).toEqual(expect.arrayContaining(['webhook_url', 'secret', 'bogus']));
  });

  it.each<[string, string]>([
    ['an array', '[]'],
    ['null', 'null'],
    ['a string', '"https://hooks.example.com/x"'],
    ['a number', '42'],
    ['true', 'true'],
  ])('a body that is not an object (%s) is 400', async (_name, body) => {
    await expectUnchangedStatus(() => A.raw('POST', HOOKS, { body, headers: json }), 400, 'invalid_request');
  });

  it('an empty body is 400', async () => {
    await expectUnchangedStatus(() => A.raw('POST', HOOKS, { headers: json }), 400, 'invalid_request');
    await expectUnchangedStatus(() => A.raw('POST', HOOKS, { body: '', headers: json }), 400, 'invalid_request');
  });
});

describe('create: what the rules admit (the boundary of each rule)', () => {
  it('a URL of exactly 2048 characters, a secret of 1 and of 512 characters', async () => {
    const url = LONG_HOST + 'b'.repeat(2048 - LONG_HOST.length);
    expect(url.length).toBe(2048);
    const n = webhookCount();
    const r = await A.post(HOOKS, { webhook_url: url, secret: 'k'.repeat(512) });
    expect(r.status, r.text).toBe(201);
    expect(r.body.webhook_url).toBe(url);
    expect(r.body.has_secret).toBe(true);
    const r1 = await A.post(HOOKS, { webhook_url: freshUrl(), secret: 'k' });
    expect(r1.status, r1.text).toBe(201);
    expect(webhookCount()).toBe(n + 2);
  });

  it('flags set false on resources they do not apply to, outcome none with no flags, app_branches/run', async () => {
    const interests = {
      resources: {
        installs: { drift_detected: false, component_health: false, outcome: 'none' },
        runners: { install_degraded: false, ops: ['unhealthy', 'inactive'] },
        sandboxes: { outcome: 'none' },
        app_branches: { ops: ['run'], approval_requests: true },
        components: { drift_detected: true, component_health: true },
      },
    };
    const r = await A.post(HOOKS, { webhook_url: freshUrl(), interests });
    expect(r.status, r.text).toBe(201);
    expect(r.body.interests).toEqual(interests); // interests as given
    expect(r.body.match).toBeNull();
  });

  it('{} for a kind is any entity; ids are returned deduplicated and sorted', async () => {
    const r = await A.post(HOOKS, {
      webhook_url: freshUrl(),
      match: { installs: {}, actions: { ids: ['act_z', 'act_a', 'act_z'], selector: { match_labels: { team: '*' } } } },
    });
    expect(r.status, r.text).toBe(201);
    expect(r.body.match).toEqual({ installs: {}, actions: { ids: ['act_a', 'act_z'], selector: { match_labels: { team: '*' } } } });
    expect(r.body.interests).toEqual({ all_events: true });
  });

  it('content type with a charset, and a +json type, are JSON', async () => {
    const r = await A.raw('POST', HOOKS, {
      body: JSON.stringify({ webhook_url: freshUrl() }),
      headers: { 'content-type': 'application/json; charset=utf-8' },
    });
    expect(r.status, r.text).toBe(201);
  });
});

describe('PATCH: every validation rule is 400 naming the field, and the webhook is unchanged', () => {
  const path = () => `${HOOKS}/${W_PLAIN.webhook_id}`;

  it('naming webhook_url is 400 (immutable), even with the same value', async () => {
    await expectRejected(() => A.patch(path(), { webhook_url: W_PLAIN.webhook_url }), 'webhook_url');
    await expectRejected(() => A.patch(path(), { webhook_url: 'https://hooks.example.com/moved' }), 'webhook_url');
    await expectRejected(
      () => A.patch(path(), { webhook_url: 'https://hooks.example.com/moved', interests: { all_events: true } }),
      'webhook_url',
    );
  });

  it('an empty body ({} or nothing) is 400', async () => {
    await expectRejected(() => A.patch(path(), {}), '(body)');
    await expectUnchangedStatus(() => A.raw('PATCH', path(), { headers: json }), 400, 'invalid_request');
  });

  it.each<[string, unknown]>([
    ['empty', ''],
    ['513 characters', 's'.repeat(513)],
    ['a number', 5],
    ['false', false],
  ])('secret: %s', async (_name, secret) => {
    await expectRejected(() => A.patch(path(), { secret }), 'secret');
  });

  it.each(BAD_INTERESTS)('interests: %s', async (_name, interests, p) => {
    await expectRejected(() => A.patch(path(), { interests }), p);
  });

  it('interests null is 400 (omit it instead)', async () => {
    await expectRejected(() => A.patch(path(), { interests: null }), 'interests');
  });

  it.each(BAD_MATCH)('match: %s', async (_name, match, p) => {
    await expectRejected(() => A.patch(path(), { match }), p);
  });

  it.each<[string, Record<string, unknown>, string]>([
    ['name', { name: 'x' }, 'name'],
    ['has_secret', { has_secret: false }, 'has_secret'],
    ['remove_secret', { remove_secret: true }, 'remove_secret'],
    ['url', { url: 'https://hooks.example.com/z' }, 'url'],
  ])('an unknown field (%s) is 400 naming it, also next to valid fields', async (_name, extra, p) => {
    await expectRejected(() => A.patch(path(), extra), p);
    await expectRejected(() => A.patch(path(), { secret: 'would-rotate-0004', ...extra }), p);
  });

  it('a valid secret next to a bad interests rotates nothing', async () => {
    const r = await expectRejected(
      () => A.patch(path(), { secret: 'would-rotate-0005', interests: { all_events: 'yes' } }),
      'interests.all_events',
    );
    expect(r.text).not.toContain('would-rotate-0005');
  });

  it('the PATCH of an unknown webhook is 404 whatever the body', async () => {
    await expectUnchangedStatus(() => A.patch(`${HOOKS}/wh_doesnotexist`, { secret: 'x' }), 404, 'not_found');
    await expectUnchangedStatus(() => A.patch(`${HOOKS}/wh_doesnotexist`, { bogus: 1 }), 404, 'not_found');
  });
});

describe('uniqueness of (url, canonical match): 409 and nothing changed', () => {
  it('create: same url, org-wide, whatever interests and secret', async () => {
    await expectUnchangedStatus(() => A.post(HOOKS, { webhook_url: SHARED_URL }), 409, 'conflict');
    await expectUnchangedStatus(() => A.post(HOOKS, { webhook_url: SHARED_URL, match: null }), 409, 'conflict');
    await expectUnchangedStatus(
      () => A.post(HOOKS, { webhook_url: SHARED_URL, secret: 'dup-secret-0006', interests: { resources: { installs: {} } } }),
      409,
      'conflict',
    );
  });

  it('create: the same match with ids reordered and duplicated, labels and kinds reordered', async () => {
    const same = {
      components: { selector: { match_labels: { env: 'prod', tier: 'web' } } },
      installs: { ids: ['inst_a', 'inst_b', 'inst_a', 'inst_b'] },
    };
    await expectUnchangedStatus(() => A.post(HOOKS, { webhook_url: SHARED_URL, match: same }), 409, 'conflict');
    await expectUnchangedStatus(() => A.post(HOOKS, { webhook_url: SHARED_URL, match: SCOPED_MATCH }), 409, 'conflict');
  });

  it('create: a different match, a different url, or another org is not a conflict', async () => {
    const n = webhookCount();
    const r1 = await A.post(HOOKS, { webhook_url: SHARED_URL, match: { installs: { ids: ['inst_a'] } } });
    expect(r1.status, r1.text).toBe(201);
    const r2 = await A.post(HOOKS, {
      webhook_url: SHARED_URL,
      match: { ...SCOPED_MATCH, components: { selector: { match_labels: { tier: 'web' } } } },
    });
    expect(r2.status, r2.text).toBe(201);
    const r3 = await A.post(HOOKS, { webhook_url: `${SHARED_URL}/other`, match: SCOPED_MATCH });
    expect(r3.status, r3.text).toBe(201);
    const r4 = await B.post(HOOKS, { webhook_url: SHARED_URL, match: SCOPED_MATCH });
    expect(r4.status, r4.text).toBe(201);
    expect(webhookCount()).toBe(n + 4);
  });

  it('PATCH into an existing pair is 409 (canonical match), and naming only interests resets match to null', async () => {
    const url = 'https://hooks.example.com/patch-conflict';
    const orgWide = await A.post(HOOKS, { webhook_url: url });
    const one = await A.post(HOOKS, {
      webhook_url: url,
      match: { installs: { ids: ['i1', 'i2'] }, actions: { selector: { match_labels: { a: '1', b: '2' } } } },
    });
    const two = await A.post(HOOKS, { webhook_url: url, match: { installs: { ids: ['i3'] } }, secret: 'two-secret-0007' });
    for (const r of [orgWide, one, two]) expect(r.status, r.text).toBe(201);
    const p = `${HOOKS}/${two.body.webhook_id}`;

    // two → one's match, written differently
    await expectUnchangedStatus(
      () => A.patch(p, { match: { actions: { selector: { match_labels: { b: '2', a: '1' } } }, installs: { ids: ['i2', 'i1', 'i2'] } } }),
      409,
      'conflict',
    );
    // naming interests only replaces the subscription: match becomes null = the org-wide pair
    await expectUnchangedStatus(() => A.patch(p, { interests: { resources: { installs: {} } } }), 409, 'conflict');
    await expectUnchangedStatus(() => A.patch(p, { match: null }), 409, 'conflict');
    // a secret alone leaves the subscription as it was: no conflict
    const s = await A.patch(p, { secret: 'two-secret-rotated-0008' });
    expect(s.status, s.text).toBe(200);
    expect(s.body.match).toEqual({ installs: { ids: ['i3'] } });
    // PATCH onto its own pair is not a conflict with itself
    const self = await A.patch(p, { match: { installs: { ids: ['i3', 'i3'] } } });
    expect(self.status, self.text).toBe(200);
    expect(self.body.match).toEqual({ installs: { ids: ['i3'] } });
    expect(self.body.interests).toEqual({ all_events: true });
  });
});

describe('bodies that are not JSON objects', () => {
  it.each<[string, string]>([
    ['truncated', '{"webhook_url": '],
    ['trailing garbage', '{"webhook_url":"https://hooks.example.com/g"} x'],
    ['single quotes', "{'webhook_url':'https://hooks.example.com/g'}"],
    ['trailing comma', '{"webhook_url":"https://hooks.example.com/g",}'],
    ['bare word', 'webhook_url'],
    ['invalid UTF-8', '\u00ff'],
  ])('malformed JSON (%s) is 400 invalid_request on create and PATCH', async (_name, body) => {
    const payload = _name === 'invalid UTF-8' ? Buffer.from([0x7b, 0xff, 0xfe, 0x7d]) : body;
    await expectUnchangedStatus(() => A.raw('POST', HOOKS, { body: payload, headers: json }), 400, 'invalid_request');
    await expectUnchangedStatus(
      () => A.raw('PATCH', `${HOOKS}/${W_PLAIN.webhook_id}`, { body: payload, headers: json }),
      400,
      'invalid_request',
    );
  });

  it('deeply nested JSON is 400, not a crash', async () => {
    const deep = '['.repeat(5000) + ']'.repeat(5000);
    await expectUnchangedStatus(() => A.raw('POST', HOOKS, { body: deep, headers: json }), 400, 'invalid_request');
    const deepInterests = `{"webhook_url":"${freshUrl()}","interests":${'{"resources":'.repeat(2000)}{}${'}'.repeat(2000)}}`;
    await expectUnchangedStatus(() => A.raw('POST', HOOKS, { body: deepInterests, headers: json }), 400, 'invalid_request');
  });

  it.each<[string, string, string]>([
    ['text/plain', 'text/plain', JSON.stringify({ webhook_url: 'https://hooks.example.com/ct1' })],
    ['text/plain with charset', 'text/plain;charset=UTF-8', JSON.stringify({ webhook_url: 'https://hooks.example.com/ct2' })],
    ['form', 'application/x-www-form-urlencoded', 'webhook_url=https%3A%2F%2Fhooks.example.com%2Fct3'],
    [
      'multipart',
      'multipart/form-data; boundary=xyz',
      '--xyz\r\nContent-Disposition: form-data; name="webhook_url"\r\n\r\nhttps://hooks.example.com/ct4\r\n--xyz--\r\n',
    ],
    ['xml', 'application/xml', '<webhook_url>https://hooks.example.com/ct5</webhook_url>'],
  ])('a %s body is 415 on create and PATCH', async (_name, contentType, body) => {
    await expectUnchangedStatus(
      () => A.raw('POST', HOOKS, { body, headers: { 'content-type': contentType } }),
      415,
      'unsupported_media_type',
    );
    await expectUnchangedStatus(
      () =>
        A.raw('PATCH', `${HOOKS}/${W_PLAIN.webhook_id}`, {
          body: JSON.stringify({ secret: 'ct-secret-0009' }),
          headers: { 'content-type': contentType },
        }),
      415,
      'unsupported_media_type',
    );
  });

  it('a JSON body with no content type at all is 415', async () => {
    // fetch would add text/plain for a string body; a Buffer body goes without a content type
    const body = Buffer.from(JSON.stringify({ webhook_url: freshUrl() }));
    await expectUnchangedStatus(() => A.raw('POST', HOOKS, { body }), 415, 'unsupported_media_type');
  });
});

/** POST a body sent with Transfer-Encoding: chunked (no content-length), through node:http. */
function postChunked(
  url: string,
  org: OrgCreds,
  method: string,
  p: string,
  head: string,
  padBytes: number,
  agent?: http.Agent,
): Promise<{ status: number; text: string; connection?: string }> {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    const req = http.request(
      {
        host: u.hostname,
        port: u.port,
        path: p,
        agent,
        method,
        headers: {
          authorization: `Bearer ${org.api_token}`,
          'x-svc-org-id': org.org_id,
          'content-type': 'application/json',
          'transfer-encoding': 'chunked',
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8'), connection: res.headers.connection }),
        );
        res.on('error', reject);
      },
    );
    // the server may answer and close before it has read everything: a write error is not a failure
    req.on('error', (err) => setTimeout(() => reject(err), 2000));
    expect(req.getHeader('content-length')).toBeUndefined();
    req.write(head);
    const chunk = Buffer.alloc(64 * 1024, 0x20);
    let left = padBytes;
    const pump = () => {
      while (left > 0) {
        const n = Math.min(left, chunk.length);
        left -= n;
        if (!req.write(n === chunk.length ? chunk : chunk.subarray(0, n))) {
          req.once('drain', pump);
          return;
        }
      }
      req.end();
    };
    pump();
  });
}

describe('body size limit (1 MiB)', () => {
  /** A valid create body padded with whitespace to exactly `size` bytes: accepted if the size were fine. */
  const padded = (size: number, url: string) => {
    const head = JSON.stringify({ webhook_url: url });
    return head + ' '.repeat(size - Buffer.byteLength(head));
  };

  it('a 2 MiB body with content-length is 413 payload_too_large, on create and PATCH', async () => {
    await expectUnchangedStatus(() => A.raw('POST', HOOKS, { body: padded(2 * MiB, freshUrl()), headers: json }), 413, 'payload_too_large');
    const patch = JSON.stringify({ secret: 'big-secret-0010' }) + ' '.repeat(2 * MiB);
    await expectUnchangedStatus(
      () => A.raw('PATCH', `${HOOKS}/${W_PLAIN.webhook_id}`, { body: patch, headers: json }),
      413,
      'payload_too_large',
    );
  });

  it('a 2 MiB body sent chunked (no content-length) is 413 too', async () => {
    const before = webhookRows();
    const head = JSON.stringify({ webhook_url: freshUrl() });
    const r = await postChunked(svc.url, orgA, 'POST', HOOKS, head, 2 * MiB);
    responses.push({ what: 'POST chunked 2 MiB', status: r.status, text: r.text });
    expect(r.status, r.text).toBe(413);
    expect(JSON.parse(r.text).error).toBe('payload_too_large');
    const rp = await postChunked(
      svc.url,
      orgA,
      'PATCH',
      `${HOOKS}/${W_PLAIN.webhook_id}`,
      JSON.stringify({ secret: 'chunk-secret-0011' }),
      2 * MiB,
    );
    responses.push({ what: 'PATCH chunked 2 MiB', status: rp.status, text: rp.text });
    expect(rp.status, rp.text).toBe(413);
    expect(webhookRows()).toEqual(before);
  });

  it('a 413 closes the connection, so a keep-alive client can send its next request', async () => {
    // one socket, reused whenever the server allows it
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const before = webhookRows();
      const head = JSON.stringify({ webhook_url: freshUrl() });
      const big = await postChunked(svc.url, orgA, 'POST', HOOKS, head, 2 * MiB, agent);
      expect(big.status, big.text).toBe(413);
      expect(big.connection).toBe('close');
      const next = await postChunked(
        svc.url,
        orgA,
        'PATCH',
        `${HOOKS}/${W_PLAIN.webhook_id}`,
        JSON.stringify({ secret: 'next-secret-0022' }),
        2 * MiB,
        agent,
      );
      expect(next.status, next.text).toBe(413);
      expect(webhookRows()).toEqual(before);
      const small = await postChunked(svc.url, orgA, 'POST', HOOKS, '{"webhook_url": 5}', 10, agent);
      expect(small.status, small.text).toBe(400);
    } finally {
      agent.destroy();
    }
    // and with content-length, through fetch's pooled connections
    const r = await A.raw('POST', HOOKS, { body: ' '.repeat(MiB + 1), headers: json });
    expect(r.status).toBe(413);
    const after = await A.get(HOOKS);
    expect(after.status).toBe(200);
  });

  it('exactly 1 MiB is accepted and 1 MiB + 1 byte is not (with and without content-length)', async () => {
    const n = webhookCount();
    const ok = await A.raw('POST', HOOKS, { body: padded(MiB, freshUrl()), headers: json });
    expect(ok.status, ok.text).toBe(201);
    expect(webhookCount()).toBe(n + 1);
    await expectUnchangedStatus(() => A.raw('POST', HOOKS, { body: padded(MiB + 1, freshUrl()), headers: json }), 413, 'payload_too_large');
    const head = JSON.stringify({ webhook_url: freshUrl() });
    const before = webhookRows();
    const over = await postChunked(svc.url, orgA, 'POST', HOOKS, head, MiB + 1 - head.length);
    expect(over.status, over.text).toBe(413);
    expect(webhookRows()).toEqual(before);
    const okChunked = await postChunked(svc.url, orgA, 'POST', HOOKS, head, MiB - head.length);
    expect(okChunked.status, okChunked.text).toBe(201);
  });
});

describe('unknown routes and methods: 404 with the error shape', () => {
  it.each<[string, string]>([
    ['GET', '/v1/nope'],
    ['POST', '/v1/orgs/current/hooks'],
    ['GET', '/v1/orgs/org_x/webhooks'],
    ['PUT', HOOKS],
    ['DELETE', HOOKS],
    ['PATCH', HOOKS],
    ['GET', '/nope'],
    ['GET', '/v2/orgs/current/webhooks'],
  ])('%s %s', async (method, p) => {
    const body = method === 'GET' ? undefined : JSON.stringify({ webhook_url: freshUrl() });
    await expectUnchangedStatus(() => A.raw(method, p, { body, headers: body ? json : {} }), 404, 'not_found');
  });

  it('unsupported methods on a webhook and its ping', async () => {
    const p = `${HOOKS}/${W_PLAIN.webhook_id}`;
    await expectUnchangedStatus(
      () => A.raw('PUT', p, { body: JSON.stringify({ secret: 'put-secret-0012' }), headers: json }),
      404,
      'not_found',
    );
    await expectUnchangedStatus(
      () => A.raw('POST', p, { body: JSON.stringify({ secret: 'post-secret-0013' }), headers: json }),
      404,
      'not_found',
    );
    await expectUnchangedStatus(() => A.raw('GET', `${p}/ping`), 404, 'not_found');
    await expectUnchangedStatus(() => A.raw('DELETE', `${p}/ping`), 404, 'not_found');
  });

  it('unknown webhook ids: GET, PATCH, DELETE, ping', async () => {
    for (const id of ['wh_doesnotexist', 'x'.repeat(5000), '%00', 'wh_%2F..%2F', "wh_' OR '1'='1"]) {
      const p = `${HOOKS}/${encodeURIComponent(decodeURIComponent(id))}`;
      await expectUnchangedStatus(() => A.get(p), 404, 'not_found');
      await expectUnchangedStatus(() => A.patch(p, { secret: 'nope-secret-0014' }), 404, 'not_found');
      await expectUnchangedStatus(() => A.del(p), 404, 'not_found');
      await expectUnchangedStatus(() => A.post(`${p}/ping`), 404, 'not_found');
    }
  });

  it('DELETE twice: 204 then 404', async () => {
    const r = await A.post(HOOKS, { webhook_url: freshUrl() });
    expect(r.status).toBe(201);
    const n = webhookCount();
    const d = await A.del(`${HOOKS}/${r.body.webhook_id}`);
    expect(d.status).toBe(204);
    expect(d.text).toBe('');
    expect(webhookCount()).toBe(n - 1);
    await expectUnchangedStatus(() => A.del(`${HOOKS}/${r.body.webhook_id}`), 404, 'not_found');
  });
});

describe('authentication (CONTRACT 2)', () => {
  const validBody = () => JSON.stringify({ webhook_url: freshUrl() });
  const withHeaders = (headers: Record<string, string>) => async (method: string, p: string, body?: string) => {
    const res = await fetch(svc.url + p, { method, headers: { ...(body ? json : {}), ...headers }, body });
    const text = await res.text();
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    responses.push({ what: `${method} ${p} (auth)`, status: res.status, text });
    return { status: res.status, body: parsed, text } as ApiResponse;
  };

  it.each<[string, () => Record<string, string>]>([
    ['no Authorization header', () => ({ 'x-svc-org-id': orgA.org_id })],
    ['unknown token', () => ({ authorization: 'Bearer svc_unknown_token_value', 'x-svc-org-id': orgA.org_id })],
    ['token without the Bearer scheme', () => ({ authorization: orgA.api_token, 'x-svc-org-id': orgA.org_id })],
    [
      'Basic scheme',
      () => ({ authorization: `Basic ${Buffer.from(`x:${orgA.api_token}`).toString('base64')}`, 'x-svc-org-id': orgA.org_id }),
    ],
    ['Bearer with no token', () => ({ authorization: 'Bearer', 'x-svc-org-id': orgA.org_id })],
    ['Bearer with a blank token', () => ({ authorization: 'Bearer    ', 'x-svc-org-id': orgA.org_id })],
    ['two tokens', () => ({ authorization: `Bearer ${orgA.api_token} ${orgA.api_token}`, 'x-svc-org-id': orgA.org_id })],
    ['token with a suffix', () => ({ authorization: `Bearer ${orgA.api_token}x`, 'x-svc-org-id': orgA.org_id })],
    ['unknown token and no org header', () => ({ authorization: 'Bearer nope' })],
    ['nothing at all', () => ({})],
  ])('401 unauthorized: %s', async (_name, headers) => {
    const call = withHeaders(headers());
    await expectUnchangedStatus(() => call('GET', HOOKS), 401, 'unauthorized');
    await expectUnchangedStatus(() => call('POST', HOOKS, validBody()), 401, 'unauthorized');
    await expectUnchangedStatus(
      () => call('PATCH', `${HOOKS}/${W_PLAIN.webhook_id}`, JSON.stringify({ secret: 'auth-secret-0015' })),
      401,
      'unauthorized',
    );
    await expectUnchangedStatus(() => call('DELETE', `${HOOKS}/${W_PLAIN.webhook_id}`), 401, 'unauthorized');
    // also on unknown routes: no route discovery without a token
    await expectUnchangedStatus(() => call('GET', '/v1/nope'), 401, 'unauthorized');
  });

  it('a revoked token is 401', async () => {
    const store = openDb(svc.db);
    let token: { token_id: string; api_token: string };
    try {
      token = createToken(store, orgA.org_id, 'to-revoke');
    } finally {
      store.close();
    }
    const client = apiClient(svc.url, { org_id: orgA.org_id, api_token: token.api_token });
    expect((await client.get(HOOKS)).status).toBe(200);
    const store2 = openDb(svc.db);
    try {
      expect(revokeToken(store2, orgA.org_id, token.token_id)).toBe(true);
    } finally {
      store2.close();
    }
    const r = await client.get(HOOKS);
    expectErrorShape(r, 401, 'unauthorized');
    await expectUnchangedStatus(() => client.post(HOOKS, { webhook_url: freshUrl() }), 401, 'unauthorized');
  });

  it.each<[string, () => Record<string, string>]>([
    ['missing X-Svc-Org-ID', () => ({ authorization: `Bearer ${orgA.api_token}` })],
    ['empty X-Svc-Org-ID', () => ({ authorization: `Bearer ${orgA.api_token}`, 'x-svc-org-id': '' })],
    ["another org's id", () => ({ authorization: `Bearer ${orgA.api_token}`, 'x-svc-org-id': orgB.org_id })],
    ['an org id that does not exist', () => ({ authorization: `Bearer ${orgA.api_token}`, 'x-svc-org-id': 'org_doesnotexist' })],
    ['the org id in another case', () => ({ authorization: `Bearer ${orgA.api_token}`, 'x-svc-org-id': orgA.org_id.toUpperCase() })],
  ])('403 forbidden: %s', async (_name, headers) => {
    const call = withHeaders(headers());
    await expectUnchangedStatus(() => call('GET', HOOKS), 403, 'forbidden');
    await expectUnchangedStatus(() => call('POST', HOOKS, validBody()), 403, 'forbidden');
    await expectUnchangedStatus(
      () => call('PATCH', `${HOOKS}/${W_PLAIN.webhook_id}`, JSON.stringify({ secret: 'auth-secret-0016' })),
      403,
      'forbidden',
    );
    await expectUnchangedStatus(() => call('DELETE', `${HOOKS}/${W_PLAIN.webhook_id}`), 403, 'forbidden');
  });

  it("another org's webhook is 404 (never 403) for GET, PATCH, DELETE, ping; and not listed", async () => {
    const p = `${HOOKS}/${W_PLAIN.webhook_id}`;
    await expectUnchangedStatus(() => B.get(p), 404, 'not_found');
    await expectUnchangedStatus(() => B.patch(p, { secret: 'cross-secret-0017' }), 404, 'not_found');
    await expectUnchangedStatus(() => B.patch(p, { match: null }), 404, 'not_found');
    await expectUnchangedStatus(() => B.del(p), 404, 'not_found');
    await expectUnchangedStatus(() => B.post(`${p}/ping`), 404, 'not_found');
    // same answer as for an id that does not exist at all (no existence leak)
    const ghost = await B.get(`${HOOKS}/wh_doesnotexist`);
    const real = await B.get(p);
    expect(real.status).toBe(ghost.status);
    expect(real.body.error).toBe(ghost.body.error);
    const list = await B.get(HOOKS);
    expect(list.status).toBe(200);
    const ids = list.body.map((w: { webhook_id: string }) => w.webhook_id);
    expect(ids).toContain(W_B.webhook_id);
    expect(ids).not.toContain(W_PLAIN.webhook_id);
    expect(ids).not.toContain(W_SCOPED.webhook_id);
    const listA = await A.get(HOOKS);
    expect(listA.body.map((w: { webhook_id: string }) => w.webhook_id)).not.toContain(W_B.webhook_id);
  });
});

describe('secrets never appear in a response', () => {
  it('create, get, list, rotate, remove, conflict and validation errors', async () => {
    const s1 = 'first-secret-value-0018';
    const s2 = 'rotated-secret-value-0019';
    const c = await A.post(HOOKS, { webhook_url: freshUrl(), secret: s1 });
    expect(c.status).toBe(201);
    expect(c.body.has_secret).toBe(true);
    expect(c.body).not.toHaveProperty('secret');
    const p = `${HOOKS}/${c.body.webhook_id}`;
    const row = () => db.prepare('SELECT secret FROM webhooks WHERE webhook_id = ?').get(c.body.webhook_id) as { secret: string | null };
    expect(row().secret).toBe(s1);
    const g = await A.get(p);
    expect(g.body).not.toHaveProperty('secret');
    const rot = await A.patch(p, { secret: s2 });
    expect(rot.status).toBe(200);
    expect(rot.body.has_secret).toBe(true);
    expect(row().secret).toBe(s2);
    const dup = await A.post(HOOKS, { webhook_url: c.body.webhook_url, secret: 'conflict-secret-0020' });
    expect(dup.status).toBe(409);
    const bad = await A.post(HOOKS, { webhook_url: 'ftp://x', secret: 'invalid-body-secret-0021' });
    expect(bad.status).toBe(400);
    const tooLong = 'L'.repeat(513);
    const long = await A.post(HOOKS, { webhook_url: freshUrl(), secret: tooLong });
    expect(long.status).toBe(400);
    const list = await A.get(HOOKS);
    for (const w of list.body) expect(w).not.toHaveProperty('secret');
    const removed = await A.patch(p, { secret: null });
    expect(removed.status).toBe(200);
    expect(removed.body.has_secret).toBe(false);
    expect(row().secret).toBeNull();
  });

  it('no response this file received contains a secret it sent', () => {
    expect(secretsSent.size).toBeGreaterThan(10);
    for (const r of responses) {
      for (const s of secretsSent) {
        if (s.length < 4) continue; // 'k', 'abc': too short to be meaningful in a text search
        expect(r.text.includes(s), `${r.what} (${r.status}) leaked a secret`).toBe(false);
      }
    }
  });
});

// ------------------------------------------------------------------ OpenAPI

type Schema = Record<string, unknown>;

/** A small JSON Schema checker: the keywords that zod's JSON Schema output uses for these bodies. */
function admits(schema: Schema | boolean, v: unknown): boolean {
  if (schema === true) return true;
  if (schema === false) return false;
  const s = schema as Schema;
  const typeOf = (x: unknown) => (x === null ? 'null' : Array.isArray(x) ? 'array' : Number.isInteger(x) ? 'integer' : typeof x);
  if (s.type !== undefined) {
    const types = Array.isArray(s.type) ? (s.type as string[]) : [s.type as string];
    const t = typeOf(v);
    if (!types.some((x) => x === t || (x === 'number' && t === 'integer'))) return false;
  }
  if (s.const !== undefined && v !== s.const) return false;
  if (Array.isArray(s.enum) && !s.enum.includes(v)) return false;
  if (s.not !== undefined && admits(s.not as Schema, v)) return false;
  if (Array.isArray(s.anyOf) && !s.anyOf.some((x) => admits(x as Schema, v))) return false;
  if (Array.isArray(s.oneOf) && s.oneOf.filter((x) => admits(x as Schema, v)).length !== 1) return false;
  if (Array.isArray(s.allOf) && !s.allOf.every((x) => admits(x as Schema, v))) return false;
  if (typeof v === 'string') {
    if (typeof s.minLength === 'number' && [...v].length < s.minLength) return false;
    if (typeof s.maxLength === 'number' && [...v].length > s.maxLength) return false;
  }
  if (Array.isArray(v)) {
    if (typeof s.minItems === 'number' && v.length < s.minItems) return false;
    if (s.items !== undefined && !v.every((x) => admits(s.items as Schema, x))) return false;
  }
  if (typeOf(v) === 'object') {
    const o = v as Record<string, unknown>;
    const props = (s.properties ?? {}) as Record<string, Schema>;
    if (Array.isArray(s.required) && !s.required.every((k) => k in o)) return false;
    for (const [k, x] of Object.entries(o)) {
      if (k in props) {
        if (!admits(props[k], x)) return false;
      } else if (s.additionalProperties !== undefined && !admits(s.additionalProperties as Schema, x)) {
        return false;
      }
    }
  }
  return true;
}

describe('GET /v1/openapi.json', () => {
  let doc: any;

  beforeAll(async () => {
    const r = await A.get('/v1/openapi.json');
    expect(r.status).toBe(200);
    doc = r.body;
  });

  it('is an OpenAPI 3.1 document describing the webhook paths', () => {
    expect(doc.openapi).toMatch(/^3\.1\.\d+$/);
    expect(doc.info?.title).toBeTypeOf('string');
    expect(Object.keys(doc.paths[HOOKS]).sort()).toEqual(['get', 'post']);
    expect(Object.keys(doc.paths[`${HOOKS}/{webhook_id}`]).sort()).toEqual(['delete', 'get', 'patch']);
    expect(doc.paths[`${HOOKS}/{webhook_id}/ping`]).toHaveProperty('post');
  });

  it('the create body schema requires webhook_url and admits no other fields', () => {
    const schema = doc.paths[HOOKS].post.requestBody.content['application/json'].schema;
    expect(schema.type).toBe('object');
    expect(schema.required).toContain('webhook_url');
    expect(schema.required).not.toContain('secret');
    expect(schema.additionalProperties).toBe(false);
    expect(Object.keys(schema.properties).sort()).toEqual([
      'delivery',
      'disable_after',
      'filter',
      'interests',
      'match',
      'secret',
      'webhook_url',
    ]);
    expect(schema.properties.secret.minLength).toBe(1);
    expect(schema.properties.secret.maxLength).toBe(512);
    expect(schema.properties.webhook_url.maxLength).toBe(2048);
  });

  it('the create body schema rejects what the API rejects, and admits what it admits', async () => {
    const schema = doc.paths[HOOKS].post.requestBody.content['application/json'].schema;
    const rejected: unknown[] = [
      {},
      { webhook_url: 42 },
      { webhook_url: freshUrl(), bogus: true },
      { webhook_url: freshUrl(), secret: '' },
      { webhook_url: freshUrl(), secret: 's'.repeat(513) },
      { webhook_url: LONG_HOST + 'c'.repeat(2049 - LONG_HOST.length) },
      { webhook_url: freshUrl(), interests: { all_events: 'yes' } },
      { webhook_url: freshUrl(), interests: { resources: { widgets: {} } } },
      { webhook_url: freshUrl(), interests: { resources: { installs: { outcome: 'some' } } } },
      { webhook_url: freshUrl(), match: { runners: {} } },
      { webhook_url: freshUrl(), match: { installs: { ids: [] } } },
    ];
    for (const body of rejected) {
      expect(admits(schema, body), `schema admits ${JSON.stringify(body).slice(0, 120)}`).toBe(false);
      const r = await expectUnchangedStatus(() => A.post(HOOKS, body), 400, 'invalid_request');
      expect(r.status).toBe(400);
    }
    const accepted: unknown[] = [
      { webhook_url: freshUrl() },
      {
        webhook_url: freshUrl(),
        secret: 'x',
        interests: { resources: { installs: { ops: ['provision'], outcome: 'failures' } } },
        match: null,
      },
      { webhook_url: freshUrl(), match: { components: { selector: { match_labels: { tier: 'web' } } } } },
    ];
    for (const body of accepted) {
      expect(admits(schema, body), `schema rejects ${JSON.stringify(body)}`).toBe(true);
      const r = await A.post(HOOKS, body);
      expect(r.status, r.text).toBe(201);
    }
  });

  it('the PATCH body schema admits no unknown fields and no webhook_url', () => {
    const schema = doc.paths[`${HOOKS}/{webhook_id}`].patch.requestBody.content['application/json'].schema;
    expect(schema.additionalProperties).toBe(false);
    expect(admits(schema, { bogus: 1 })).toBe(false);
    expect(admits(schema, { webhook_url: 'https://hooks.example.com/x' })).toBe(false);
    expect(admits(schema, { secret: null })).toBe(true);
    expect(admits(schema, { secret: 'x', match: null })).toBe(true);
  });
});

describe('never a 500', () => {
  it('no response in this file was a 5xx', () => {
    expect(responses.length).toBeGreaterThan(200);
    const bad = responses.filter((r) => r.status >= 500);
    expect(bad, JSON.stringify(bad.slice(0, 3))).toEqual([]);
  });
});
