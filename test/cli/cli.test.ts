// The API commands of `svc` (CONTRACT 7):
//  1. usage errors (exit 2) never contact the API;
//  2. request shapes and error mapping against a small recording HTTP server;
//  3. end to end against a real `svc serve` (one child process for the whole group).
// The commands run in this process (runCli: main(argv) with the call's SVC_* variables, stdin,
// stdout, stderr and exit code), except a few that run the real binary as a child process
// (runCliProcess) to prove what a user sees: a usage error (exit 2), an API error (exit 1 with the
// server's message), --secret-file - through a real stdin pipe, an undelivered ping (exit 1).
import { spawn, type ChildProcess } from 'node:child_process';
import { createHmac } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli as cli, runCliProcess, type CliResult } from '../helpers/cli.ts';
import { BIN, ROOT } from '../helpers/paths.ts';
import { waitFor, within } from '../helpers/wait.ts';

const both = (r: CliResult) => `${r.stdout}\n${r.stderr}`;

interface Recorded {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** An HTTP server that records requests and answers with `reply` (default: 500, so nothing passes by accident). */
async function recorder(reply?: (req: Recorded) => { status: number; body?: unknown }) {
  const requests: Recorded[] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      const rec = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body };
      requests.push(rec);
      const r = reply ? reply(rec) : { status: 500, body: { error: 'internal', message: 'recorder' } };
      if (r.body === undefined) {
        res.writeHead(r.status);
        res.end();
      } else {
        res.writeHead(r.status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(r.body));
      }
    });
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url, requests, close: () => new Promise<void>((ok) => server.close(() => ok())) };
}

/** A port nothing listens on. */
async function closedPort(): Promise<number> {
  const s = http.createServer();
  await new Promise<void>((ok) => s.listen(0, '127.0.0.1', ok));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((ok) => s.close(() => ok()));
  return port;
}

const SUB = {
  interests: { resources: { installs: { ops: ['provision'], outcome: 'completion' }, components: { drift_detected: true } } },
  match: { installs: { ids: ['inst_b', 'inst_a'] } },
};

const tmpDir = () => fs.mkdtempSync(path.join(os.tmpdir(), 'svc-cli-'));

// ---------------------------------------------------------------- 1. usage errors

describe('usage errors exit 2 and send nothing', () => {
  let rec: Awaited<ReturnType<typeof recorder>>;
  let env: Record<string, string>;
  beforeAll(async () => {
    rec = await recorder();
    env = { SVC_API_URL: rec.url, SVC_API_TOKEN: 'svc_tok', SVC_ORG_ID: 'org_1' };
  });
  afterAll(async () => {
    // nothing was contacted by any of the cases of this group
    expect(rec.requests).toEqual([]);
    await rec.close();
  });

  it('--subscription together with --subscription-file: exit 2, "mutually exclusive"', async () => {
    const file = path.join(tmpDir(), 'sub.json');
    fs.writeFileSync(file, JSON.stringify(SUB));
    const r = await cli(
      ['webhooks', 'create', '--url', 'http://127.0.0.1:9/x', '--subscription', JSON.stringify(SUB), '--subscription-file', file],
      env,
    );
    expect(r.code, both(r)).toBe(2);
    expect(r.stderr).toMatch(/mutually exclusive/);
    const u = await cli(['webhooks', 'update', 'wh_1', '--subscription', '{}', '--subscription-file', file], env);
    expect(u.code, both(u)).toBe(2);
    expect(u.stderr).toMatch(/mutually exclusive/);
    expect(rec.requests).toEqual([]);
  });

  it('create without --url: exit 2 (the real binary)', async () => {
    const r = await runCliProcess(['webhooks', 'create', '--subscription', JSON.stringify(SUB)], env);
    expect(r.code, both(r)).toBe(2);
    expect(r.stderr).toMatch(/--url/);
  });

  it('missing token or org: exit 2, even with a closed port as the API URL', async () => {
    const closed = `http://127.0.0.1:${await closedPort()}`;
    for (const e of [{ ...env, SVC_API_TOKEN: '' } as Record<string, string>, { SVC_API_URL: closed, SVC_ORG_ID: 'org_1' }]) {
      const r = await cli(['webhooks', 'list'], e);
      expect(r.code, both(r)).toBe(2);
      expect(r.stderr).toMatch(/token/i);
    }
    const noOrg = await cli(['installs', 'list', '--token', 't'], { SVC_API_URL: rec.url });
    expect(noOrg.code, both(noOrg)).toBe(2);
    expect(noOrg.stderr).toMatch(/org/i);
  });

  it('a subscription document that is not JSON, not an object, or has unknown keys: exit 2', async () => {
    for (const doc of ['{not json', '[1]', '{"interests": {"all_events": true}, "scope": {}}']) {
      const r = await cli(['webhooks', 'create', '--url', 'http://127.0.0.1:9/x', '--subscription', doc], env);
      expect(r.code, `${doc}: ${both(r)}`).toBe(2);
    }
    const missing = await cli(
      ['webhooks', 'create', '--url', 'http://127.0.0.1:9/x', '--subscription-file', path.join(tmpDir(), 'nope.json')],
      env,
    );
    expect(missing.code, both(missing)).toBe(2);
  });

  it('update: --secret with --remove-secret, or nothing to update: exit 2', async () => {
    const r = await cli(['webhooks', 'update', 'wh_1', '--secret', 's', '--remove-secret'], env);
    expect(r.code, both(r)).toBe(2);
    expect(r.stderr).toMatch(/mutually exclusive/);
    const n = await cli(['webhooks', 'update', 'wh_1'], env);
    expect(n.code, both(n)).toBe(2);
  });

  it('--secret-file with --secret or --remove-secret, an unreadable or empty one: exit 2, the secret never echoed', async () => {
    const file = path.join(tmpDir(), 'secret.txt');
    fs.writeFileSync(file, 'file-secret-value\n');
    const empty = path.join(tmpDir(), 'empty.txt');
    fs.writeFileSync(empty, '\n');
    const cases: Array<[string[], RegExp, string?]> = [
      [
        ['webhooks', 'create', '--url', 'http://127.0.0.1:9/x', '--secret', 'inline-secret-value', '--secret-file', file],
        /--secret and --secret-file are mutually exclusive/,
      ],
      [['webhooks', 'update', 'wh_1', '--secret', 'inline-secret-value', '--secret-file', file], /mutually exclusive/],
      [
        ['webhooks', 'update', 'wh_1', '--secret-file', file, '--remove-secret'],
        /--secret-file and --remove-secret are mutually exclusive/,
      ],
      [['webhooks', 'update', 'wh_1', '--secret-file', '-', '--remove-secret'], /mutually exclusive/, 'stdin-secret-value\n'],
      [
        ['webhooks', 'create', '--url', 'http://127.0.0.1:9/x', '--secret-file', path.join(tmpDir(), 'nope.txt')],
        /cannot read --secret-file .*ENOENT/,
      ],
      [['webhooks', 'create', '--url', 'http://127.0.0.1:9/x', '--secret-file', empty], /is empty/],
      [['webhooks', 'update', 'wh_1', '--secret-file', '-'], /--secret-file - \(stdin\) is empty/, ''],
    ];
    const results = await Promise.all(cases.map(([args, , input]) => cli(args, env, input)));
    for (const [i, [args, message]] of cases.entries()) {
      const r = results[i];
      expect(r.code, `${args.join(' ')}: ${both(r)}`).toBe(2);
      expect(r.stderr).toMatch(message);
      expect(both(r)).not.toMatch(/(file|inline|stdin)-secret-value/);
    }
  }, 120_000);

  it('--previous-secret-ttl without a new secret, over 7 days, or not a duration: exit 2', async () => {
    const cases: Array<[string[], RegExp]> = [
      [['webhooks', 'update', 'wh_1', '--previous-secret-ttl', '1h'], /needs a new secret/],
      [['webhooks', 'update', 'wh_1', '--remove-secret', '--previous-secret-ttl', '1h'], /needs a new secret/],
      [['webhooks', 'update', 'wh_1', '--subscription', '{}', '--previous-secret-ttl', '1h'], /needs a new secret/],
      [['webhooks', 'update', 'wh_1', '--secret', 's', '--previous-secret-ttl', '8d'], /over 7 days/],
      [['webhooks', 'update', 'wh_1', '--secret', 's', '--previous-secret-ttl', '168h1m'], /not a duration/],
      [['webhooks', 'update', 'wh_1', '--secret', 's', '--previous-secret-ttl', 'soon'], /not a duration/],
      [['webhooks', 'update', 'wh_1', '--secret', 's', '--previous-secret-ttl', '1500ms'], /whole number of seconds/],
      [['webhooks', 'create', '--url', 'http://127.0.0.1:9/x', '--secret', 's', '--previous-secret-ttl', '1h'], /unknown option/],
    ];
    const results = await Promise.all(cases.map(([args]) => cli(args, env)));
    for (const [i, [args, message]] of cases.entries()) {
      expect(results[i].code, `${args.join(' ')}: ${both(results[i])}`).toBe(2);
      expect(results[i].stderr).toMatch(message);
    }
  }, 120_000);

  it('rollback without a terminal and without --yes refuses (exit 2); missing --app-config is exit 2', async () => {
    const r = await cli(['installs', 'rollback', 'inst_1', '--app-config', 'cfg_1'], env);
    expect(r.code, both(r)).toBe(2);
    expect(r.stderr).toMatch(/--yes/);
    const m = await cli(['installs', 'rollback', 'inst_1', '--yes'], env);
    expect(m.code, both(m)).toBe(2);
  });

  it('unknown options and missing arguments: exit 2', async () => {
    expect((await cli(['webhooks', 'list', '--bogus'], env)).code).toBe(2);
    expect((await cli(['webhooks', 'delete'], env)).code).toBe(2);
    expect((await cli(['workflows', 'approve', 'wf_1'], env)).code).toBe(2);
  });
});

// ---------------------------------------------------------------- 2. request shapes (recording server)

describe('requests and error mapping (recording server)', () => {
  let rec: Awaited<ReturnType<typeof recorder>>;
  let env: Record<string, string>;
  const WH = {
    webhook_id: 'wh_1',
    webhook_url: 'http://example.test/h',
    has_secret: true,
    interests: { all_events: true },
    match: null,
    created_at: 't',
    updated_at: 't',
    previous_secret_expires_at: '2026-01-02T00:00:00.000Z',
    delivery_status: {
      last_attempt_at: '2026-01-01T10:00:00.000Z',
      last_outcome: 'failure',
      last_status_code: 503,
      last_error: 'HTTP 503',
      consecutive_failures: 2,
      attempts_total: 9,
      failures_total: 3,
      state: 'failing',
    },
  };
  const WH2 = {
    ...WH,
    webhook_id: 'wh_2',
    webhook_url: 'http://example.test/h2',
    previous_secret_expires_at: null,
    delivery_status: {
      last_attempt_at: null,
      last_outcome: null,
      last_status_code: null,
      last_error: null,
      consecutive_failures: 0,
      attempts_total: 0,
      failures_total: 0,
    },
  };
  const PLAN = {
    changed: true,
    components: {
      added: [],
      removed: [],
      changed: [{ name: 'api', changes: [{ path: 'values.image', op: 'replace', old: 'api:2', new: 'api:1' }] }],
      unchanged: [{ name: 'db' }],
    },
    sandbox_changed: false,
    inputs_changed: false,
  };
  beforeAll(async () => {
    rec = await recorder((r) => {
      const u = r.url;
      if (u === '/v1/orgs/current/webhooks' && r.method === 'GET') return { status: 200, body: [WH, WH2] };
      if (u === '/v1/orgs/current/webhooks' && r.method === 'POST') {
        const b = JSON.parse(r.body);
        if (b.webhook_url === 'bad')
          return {
            status: 400,
            body: {
              error: 'invalid_request',
              message: 'invalid webhook',
              details: [{ path: 'webhook_url', message: 'must be an absolute http or https URL' }],
            },
          };
        return { status: 201, body: WH };
      }
      if (u.startsWith('/v1/orgs/current/webhooks/') && r.method === 'PATCH') return { status: 200, body: WH };
      if (u === '/v1/orgs/current/webhooks/wh_gone' && r.method === 'DELETE')
        return { status: 404, body: { error: 'not_found', message: 'no webhook wh_gone' } };
      if (u.startsWith('/v1/orgs/current/webhooks/') && r.method === 'DELETE') return { status: 204 };
      if (u === '/v1/orgs/current/webhooks/wh_down/enable')
        return {
          status: 409,
          body: { error: 'conflict', message: 'the webhook is still disabled: its ping was not delivered (HTTP 503)' },
        };
      if (u.endsWith('/enable'))
        return { status: 200, body: { webhook: WH2, ...(JSON.parse(r.body).recover ? { recovery_id: 'rcv_1' } : {}) } };
      if (u.endsWith('/disable')) {
        const note = JSON.parse(r.body).note;
        return {
          status: 200,
          body: {
            ...WH2,
            delivery_status: {
              ...WH2.delivery_status,
              state: 'disabled',
              disabled_at: '2026-01-01T11:00:00.000Z',
              disabled_reason: note ?? 'manual',
            },
          },
        };
      }
      if (u.endsWith('/ping'))
        return { status: 200, body: { delivered: false, status: 503, error: 'receiver answered 503', duration_ms: 3 } };
      if (u === '/v1/installs/inst_1/app-config-updates') {
        const b = JSON.parse(r.body);
        return b.plan_only
          ? { status: 200, body: { plan: PLAN, applied: false } }
          : { status: 201, body: { plan: PLAN, applied: true, workflow_id: 'wf_9', version_id: 'ver_9' } };
      }
      if (u === '/v1/installs/inst_1/app-config-versions') {
        return {
          status: 200,
          body: [
            { version: 2, version_id: 'ver_9', app_config_id: 'cfg_1', old_app_config_id: 'cfg_2', app_config: { version: 1 } },
            { version: 1, version_id: 'ver_1', app_config_id: 'cfg_2', old_app_config_id: null, app_config: { version: 2 } },
          ],
        };
      }
      if (u === '/v1/installs/inst_1/app-config-versions/ver_9/diff')
        return { status: 200, body: { version_id: 'ver_9', from_app_config_id: 'cfg_2', to_app_config_id: 'cfg_1', ...PLAN } };
      if (u === '/v1/apps/app_1/branches/br_1/runs') return { status: 201, body: { run_id: 'run_1', workflow_id: 'wf_b' } };
      if (u.startsWith('/v1/workflows/wf_b/steps/'))
        return {
          status: 200,
          body: {
            step_id: 'st_2',
            name: 'plan install group: canary',
            idx: 1,
            status: 'succeeded',
            approval: { status: 'approved', note: 'ok' },
          },
        };
      if (u === '/v1/workflows/wf_b') {
        return {
          status: 200,
          body: {
            workflow_id: 'wf_b',
            type: 'app_branch_run',
            status: 'started',
            owner_type: 'app_branches',
            owner_id: 'br_1',
            steps: [
              {
                step_id: 'st_2',
                name: 'plan install group: canary',
                idx: 1,
                status: 'awaiting_approval',
                execution_type: 'approval',
                target_type: null,
                target_id: null,
                plan: {
                  install_group: 'canary',
                  installs: [
                    { install_id: 'inst_1', install_name: 'canary-1', old_app_config_id: 'cfg_2', new_app_config_id: 'cfg_1', diff: PLAN },
                  ],
                },
              },
              {
                step_id: 'st_1',
                name: 'build components',
                idx: 0,
                status: 'succeeded',
                execution_type: 'skipped',
                target_type: null,
                target_id: null,
              },
            ],
          },
        };
      }
      return { status: 404, body: { error: 'not_found', message: `no route ${r.method} ${u}` } };
    });
    env = { SVC_API_URL: rec.url, SVC_API_TOKEN: 'svc_tok', SVC_ORG_ID: 'org_1' };
  });
  afterAll(async () => rec.close());
  const since = (n: number) => rec.requests.slice(n);

  it('sends the bearer token and org header; global flags work after the arguments and override the environment', async () => {
    const n = rec.requests.length;
    const r = await cli(['webhooks', 'list', '--json', '--api-url', rec.url, '--token', 'flag_tok', '--org', 'org_flag'], {
      SVC_API_URL: 'http://127.0.0.1:1',
      SVC_API_TOKEN: 'env_tok',
      SVC_ORG_ID: 'org_env',
    });
    expect(r.code, both(r)).toBe(0);
    expect(r.json).toEqual([WH, WH2]); // --json: the whole objects, as the API returned them
    const [q] = since(n);
    expect(q.method).toBe('GET');
    expect(q.headers.authorization).toBe('Bearer flag_tok');
    expect(q.headers['x-svc-org-id']).toBe('org_flag');
    // before the arguments too, and on the group
    const r2 = await cli(['webhooks', '--json', 'delete', '--org', 'org_x', 'wh_1'], env);
    expect(r2.code, both(r2)).toBe(0);
    expect(since(n)[1]).toMatchObject({ method: 'DELETE', url: '/v1/orgs/current/webhooks/wh_1' });
    expect(since(n)[1].headers['x-svc-org-id']).toBe('org_x');
  });

  it("create sends webhook_url, secret and the document's keys; the secret is never printed", async () => {
    const n = rec.requests.length;
    const file = path.join(tmpDir(), 'sub.json');
    fs.writeFileSync(file, JSON.stringify(SUB));
    const r = await cli(
      ['webhooks', 'create', '--url', 'http://example.test/h', '--secret', 'top-secret-value', '--subscription-file', file],
      env,
    );
    expect(r.code, both(r)).toBe(0);
    expect(both(r)).not.toContain('top-secret-value');
    expect(r.stdout).toContain('wh_1');
    const inline = await cli(
      ['webhooks', 'create', '--url', 'http://example.test/h', '--subscription', JSON.stringify({ interests: SUB.interests })],
      env,
    );
    expect(inline.code, both(inline)).toBe(0);
    const plain = await cli(['webhooks', 'create', '--url', 'http://example.test/h'], env);
    expect(plain.code, both(plain)).toBe(0);
    const bodies = since(n).map((q) => JSON.parse(q.body));
    expect(since(n).every((q) => q.headers['content-type']?.startsWith('application/json'))).toBe(true);
    expect(bodies).toEqual([
      { webhook_url: 'http://example.test/h', secret: 'top-secret-value', ...SUB },
      { webhook_url: 'http://example.test/h', interests: SUB.interests },
      { webhook_url: 'http://example.test/h' },
    ]);
  });

  it("list: a table with the delivery status columns (LAST, FAILS in a row, ATTEMPTS, FAILURES) and the secret's state", async () => {
    const r = await cli(['webhooks', 'list'], env);
    expect(r.code, both(r)).toBe(0);
    const lines = r.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(
      /^WEBHOOK_ID\s+WEBHOOK_URL\s+SECRET\s+INTERESTS\s+MATCH\s+STATE\s+LAST\s+FAILS\s+ATTEMPTS\s+FAILURES\s+CREATED_AT$/,
    );
    const failing = /^wh_1\s+http:\/\/example\.test\/h\s+rotating\s+all events\s+org-wide\s+failing\s+/;
    expect(lines[1]).toMatch(failing);
    expect(lines[1].replace(failing, '')).toMatch(/^failure 503 2026-01-01T10:00:00\.000Z\s+2\s+9\s+3\s+t$/);
    expect(lines[2]).toMatch(/^wh_2\s+http:\/\/example\.test\/h2\s+yes\s+all events\s+org-wide\s+active\s+-\s+0\s+0\s+0\s+t$/);
  });

  it(
    "disable [--note], enable [--recover] (exit 1 with the server's message when the ping fails), --disable-after on create " +
      'and update',
    async () => {
      const n = rec.requests.length;
      const off = await cli(['webhooks', 'disable', 'wh_2', '--note', 'migrating'], env);
      expect(off.code, both(off)).toBe(0);
      expect(off.stdout).toMatch(/disabled webhook wh_2/);
      expect(off.stdout).toMatch(/disabled_reason:\s+migrating/);
      const on = await cli(['webhooks', 'enable', 'wh_2', '--recover'], env);
      expect(on.code, both(on)).toBe(0);
      expect(on.stdout).toContain('recovery rcv_1 started');
      const refused = await cli(['webhooks', 'enable', 'wh_down'], env);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain('its ping was not delivered (HTTP 503)');
      expect((await cli(['webhooks', 'create', '--url', 'http://example.test/h', '--disable-after', '50:1h'], env)).code).toBe(0);
      expect((await cli(['webhooks', 'update', 'wh_1', '--disable-after', 'off'], env)).code).toBe(0);
      const sent = since(n).map((q) => [q.method, q.url, q.body ? JSON.parse(q.body) : null]);
      expect(sent).toEqual([
        ['POST', '/v1/orgs/current/webhooks/wh_2/disable', { note: 'migrating' }],
        ['POST', '/v1/orgs/current/webhooks/wh_2/enable', { recover: true }],
        ['POST', '/v1/orgs/current/webhooks/wh_down/enable', {}],
        ['POST', '/v1/orgs/current/webhooks', { webhook_url: 'http://example.test/h', disable_after: { failures: 50, duration: '1h' } }],
        ['PATCH', '/v1/orgs/current/webhooks/wh_1', { disable_after: null }],
      ]);
      // out of range: exit 2 before any request
      const m = rec.requests.length;
      for (const v of ['9:1h', '50:31d', '50', 'x:1h'])
        expect((await cli(['webhooks', 'create', '--url', 'http://example.test/h', '--disable-after', v], env)).code, v).toBe(2);
      expect(rec.requests.length).toBe(m);
    },
  );

  it('--ordering per_key|none on create and update sends delivery (CONTRACT 10.1); anything else exits 2 before any request', async () => {
    const n = rec.requests.length;
    expect((await cli(['webhooks', 'create', '--url', 'http://example.test/o', '--ordering', 'per_key'], env)).code).toBe(0);
    expect((await cli(['webhooks', 'update', 'wh_1', '--ordering', 'none'], env)).code).toBe(0);
    const sent = since(n).map((q) => [q.method, q.url, q.body ? JSON.parse(q.body) : null]);
    expect(sent).toEqual([
      ['POST', '/v1/orgs/current/webhooks', { webhook_url: 'http://example.test/o', delivery: { ordering: 'per_key' } }],
      ['PATCH', '/v1/orgs/current/webhooks/wh_1', { delivery: null }],
    ]);
    const m = rec.requests.length;
    expect((await cli(['webhooks', 'update', 'wh_1', '--ordering', 'fifo'], env)).code).toBe(2);
    expect(rec.requests.length).toBe(m);
  });

  it('--secret-file (a file or - for stdin) sends its contents without one trailing newline; --previous-secret-ttl ' +
    'sends seconds', async () => {
    const n = rec.requests.length;
    const dir = tmpDir();
    const one = path.join(dir, 'one');
    fs.writeFileSync(one, 'from-a-file\n');
    const two = path.join(dir, 'two');
    fs.writeFileSync(two, 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n\n');
    const runs: Array<[string[], string?]> = [
      [['webhooks', 'create', '--url', 'http://example.test/h', '--secret-file', one]],
      [['webhooks', 'create', '--url', 'http://example.test/h', '--secret-file', '-'], 'from stdin\r\n'],
      [['webhooks', 'update', 'wh_1', '--secret-file', two]],
      [['webhooks', 'update', 'wh_1', '--secret-file', '-', '--previous-secret-ttl', '1h'], 'rotated-via-stdin'],
      [['webhooks', 'update', 'wh_1', '--secret', 'inline', '--previous-secret-ttl', '7d']],
      [['webhooks', 'update', 'wh_1', '--previous-secret-ttl', '30m', '--secret', 'after', '--json']],
      [['webhooks', 'update', 'wh_1', '--secret', 'cut', '--previous-secret-ttl', '0']],
    ];
    for (const [args, input] of runs) {
      const r = await cli(args, env, input);
      expect(r.code, `${args.join(' ')}: ${both(r)}`).toBe(0);
      expect(both(r)).not.toMatch(/from-a-file|from stdin|MfKQ9r8G|rotated-via-stdin/);
    }
    expect(since(n).map((q) => [q.method, JSON.parse(q.body)])).toEqual([
      ['POST', { webhook_url: 'http://example.test/h', secret: 'from-a-file' }],
      ['POST', { webhook_url: 'http://example.test/h', secret: 'from stdin' }],
      ['PATCH', { secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n' }], // exactly one newline dropped
      ['PATCH', { secret: 'rotated-via-stdin', previous_secret_ttl_s: 3600 }],
      ['PATCH', { secret: 'inline', previous_secret_ttl_s: 604800 }],
      ['PATCH', { secret: 'after', previous_secret_ttl_s: 1800 }],
      ['PATCH', { secret: 'cut', previous_secret_ttl_s: 0 }],
    ]);
  }, 120_000);

  it('update: --remove-secret sends secret null; a subscription sends its keys; an empty document resets the subscription', async () => {
    const n = rec.requests.length;
    expect((await cli(['webhooks', 'update', 'wh_1', '--remove-secret'], env)).code).toBe(0);
    expect(
      (await cli(['webhooks', 'update', 'wh_1', '--secret', 'rot', '--subscription', JSON.stringify({ interests: SUB.interests })], env))
        .code,
    ).toBe(0);
    expect((await cli(['webhooks', 'update', 'wh_1', '--subscription', '{}', '--json'], env)).code).toBe(0);
    expect(since(n).map((q) => [q.method, q.url, JSON.parse(q.body)])).toEqual([
      ['PATCH', '/v1/orgs/current/webhooks/wh_1', { secret: null }],
      ['PATCH', '/v1/orgs/current/webhooks/wh_1', { secret: 'rot', interests: SUB.interests }],
      ['PATCH', '/v1/orgs/current/webhooks/wh_1', { match: null }],
    ]);
  });

  it("API errors exit 1 with the server's message and the detail paths", async () => {
    const r = await runCliProcess(['webhooks', 'create', '--url', 'bad'], env);
    expect(r.code, both(r)).toBe(1);
    expect(r.stderr).toContain('invalid webhook');
    expect(r.stderr).toContain('webhook_url');
    const d = await cli(['webhooks', 'delete', 'wh_gone'], env);
    expect(d.code, both(d)).toBe(1);
    expect(d.stderr).toContain('no webhook wh_gone');
  });

  it('a network error exits 1 with a clear message', async () => {
    const port = await closedPort();
    const r = await cli(['webhooks', 'list'], { ...env, SVC_API_URL: `http://127.0.0.1:${port}` });
    expect(r.code, both(r)).toBe(1);
    expect(r.stderr).toMatch(/cannot reach the svc API/);
    expect(r.stderr).toContain(String(port));
  });

  it('ping: an undelivered ping exits 1 and still prints the result', async () => {
    const r = await runCliProcess(['webhooks', 'ping', 'wh_1', '--json'], env);
    expect(r.code, both(r)).toBe(1);
    expect(r.json).toEqual({ delivered: false, status: 503, error: 'receiver answered 503', duration_ms: 3 });
    expect(r.stderr).toMatch(/not delivered \(receiver answered 503\)/);
    const p = await cli(['webhooks', 'ping', 'wh_1'], env);
    expect(p.code).toBe(1);
    expect(p.stdout).toMatch(/delivered:\s+no/);
    expect(p.stdout).toContain('503');
  });

  it('rollback --plan-only posts one plan_only request; --yes plans then applies', async () => {
    let n = rec.requests.length;
    const plan = await cli(['installs', 'rollback', 'inst_1', '--app-config', 'cfg_1', '--plan-only'], env);
    expect(plan.code, both(plan)).toBe(0);
    expect(plan.stdout).toContain('values.image');
    expect(plan.stdout).toContain('"api:2" -> "api:1"');
    expect(since(n).map((q) => JSON.parse(q.body))).toEqual([{ app_config_id: 'cfg_1', plan_only: true }]);

    n = rec.requests.length;
    const applied = await cli(['installs', 'rollback', 'inst_1', '--app-config', 'cfg_1', '--yes', '--json'], env);
    expect(applied.code, both(applied)).toBe(0);
    expect(applied.json).toMatchObject({ applied: true, workflow_id: 'wf_9', version_id: 'ver_9' });
    expect(since(n).map((q) => [q.method, q.url, JSON.parse(q.body)])).toEqual([
      ['POST', '/v1/installs/inst_1/app-config-updates', { app_config_id: 'cfg_1', plan_only: true }],
      ['POST', '/v1/installs/inst_1/app-config-updates', { app_config_id: 'cfg_1' }],
    ]);
  });

  it('installs diff is human readable', async () => {
    const r = await cli(['installs', 'diff', 'inst_1', 'ver_9'], env);
    expect(r.code, both(r)).toBe(0);
    expect(r.stdout).toMatch(/~ api/);
    expect(r.stdout).toMatch(/values\.image: "api:2" -> "api:1"/);
    expect(r.stdout).toMatch(/= db/);
    expect(r.stdout).toMatch(/from:\s+config v2 \(cfg_2\)/);
    expect(r.stdout).toMatch(/to:\s+config v1 \(cfg_1\)/);
  });

  it('branches run, workflows get/approve/reject', async () => {
    const n = rec.requests.length;
    const run = await cli(['branches', 'run', 'app_1', 'br_1', '--app-config', 'cfg_1', '--skip-builds', '--json'], env);
    expect(run.code, both(run)).toBe(0);
    expect(run.json).toEqual({ run_id: 'run_1', workflow_id: 'wf_b' });
    const get = await cli(['workflows', 'get', 'wf_b'], env);
    expect(get.code, both(get)).toBe(0);
    const lines = get.stdout.split('\n');
    const head = lines.findIndex((l) => l.startsWith('IDX'));
    expect(lines[head]).toMatch(/IDX\s+STEP_ID\s+NAME\s+STATUS\s+EXECUTION_TYPE\s+TARGET/);
    expect(lines[head + 1]).toMatch(/^0\s+st_1\s+build components/);
    expect(lines[head + 2]).toMatch(/^1\s+st_2\s+plan install group: canary\s+awaiting_approval\s+approval/);
    expect(get.stdout).toContain('canary-1 (inst_1): cfg_2 -> cfg_1');
    const ap = await cli(['workflows', 'approve', 'wf_b', 'st_2', '--note', 'ok'], env);
    expect(ap.code, both(ap)).toBe(0);
    const rj = await cli(['workflows', 'reject', 'wf_b', 'st_2'], env);
    expect(rj.code, both(rj)).toBe(0);
    const reqs = since(n).filter((q) => q.method === 'POST');
    expect(reqs.map((q) => [q.url, JSON.parse(q.body)])).toEqual([
      ['/v1/apps/app_1/branches/br_1/runs', { app_config_id: 'cfg_1', skip_builds: true }],
      ['/v1/workflows/wf_b/steps/st_2/approval', { response: 'approved', note: 'ok' }],
      ['/v1/workflows/wf_b/steps/st_2/approval', { response: 'rejected' }],
    ]);
  });
});

// ---------------------------------------------------------------- 3. end to end with `svc serve`

describe('against a real svc serve', () => {
  let dir: string;
  let db: string;
  let server: ChildProcess | undefined;
  let url = '';
  let serverLog = '';
  let rx: Awaited<ReturnType<typeof recorder>>;
  let env: Record<string, string>;
  let org: { org_id: string; api_token: string };

  beforeAll(async () => {
    dir = tmpDir();
    db = path.join(dir, 'svc.db');
    rx = await recorder(() => ({ status: 200, body: { ok: true } }));
    const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('SVC_'))) as Record<string, string>;
    server = spawn(process.execPath, [BIN, 'serve', '--port', '0', '--db', db, '--allow-private-targets'], {
      cwd: ROOT,
      env: base,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`svc serve did not print "listening on" within 20 s:\n${serverLog}`)), 20_000);
      const onData = (d: Buffer) => {
        serverLog += d;
        const m = /listening on (http:\/\/[A-Za-z0-9.:[\]-]+)/.exec(serverLog);
        if (m) {
          clearTimeout(timer);
          resolve(m[1]);
        }
      };
      server!.stdout!.on('data', onData);
      server!.stderr!.on('data', (d) => (serverLog += d));
      server!.on('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`svc serve exited (${code}) before listening:\n${serverLog}`));
      });
    });
    const o = await cli(['orgs', 'create', '--name', 'cli-e2e', '--db', db]);
    expect(o.code, both(o)).toBe(0);
    org = o.json;
    env = { SVC_API_URL: url, SVC_API_TOKEN: org.api_token, SVC_ORG_ID: org.org_id };
  }, 30_000);

  afterAll(async () => {
    if (server && server.exitCode === null) {
      const exited = new Promise((ok) => server!.once('exit', ok));
      server.kill('SIGTERM');
      await within(exited, 5000);
      if (server.exitCode === null) server.kill('SIGKILL');
    }
    await rx?.close();
  });

  it('create (file, inline, none), list, update, delete', async () => {
    const file = path.join(dir, 'sub.json');
    fs.writeFileSync(file, JSON.stringify(SUB));
    const c1 = await cli(
      ['webhooks', 'create', '--url', `${rx.url}/a`, '--secret', 'e2e-secret-1', '--subscription-file', file, '--json'],
      env,
    );
    expect(c1.code, both(c1)).toBe(0);
    expect(c1.json).toMatchObject({
      webhook_url: `${rx.url}/a`,
      has_secret: true,
      interests: SUB.interests,
      match: { installs: { ids: ['inst_a', 'inst_b'] } },
    });
    expect(both(c1)).not.toContain('e2e-secret-1');
    const c2 = await cli(
      [
        'webhooks',
        'create',
        '--url',
        `${rx.url}/b`,
        '--subscription',
        JSON.stringify({ interests: { resources: { sandboxes: { outcome: 'failures' } } } }),
        '--json',
      ],
      env,
    );
    expect(c2.code, both(c2)).toBe(0);
    expect(c2.json.match).toBeNull();
    const c3 = await cli(['webhooks', 'create', '--url', `${rx.url}/c`, '--json'], env);
    expect(c3.code, both(c3)).toBe(0);
    expect(c3.json.interests).toEqual({ all_events: true });

    const list = await cli(['webhooks', 'list', '--json'], env);
    expect(list.code, both(list)).toBe(0);
    expect(list.json.map((w: any) => w.webhook_id).sort()).toEqual([c1.json.webhook_id, c2.json.webhook_id, c3.json.webhook_id].sort());
    const plain = await cli(['webhooks', 'list'], env);
    expect(plain.code).toBe(0);
    for (const w of [c1, c2, c3]) expect(plain.stdout).toContain(w.json.webhook_id);

    const id = c1.json.webhook_id;
    const u = await cli(
      [
        'webhooks',
        'update',
        id,
        '--subscription',
        JSON.stringify({ interests: { resources: { components: { ops: ['deploy'] } } } }),
        '--json',
      ],
      env,
    );
    expect(u.code, both(u)).toBe(0);
    expect(u.json).toMatchObject({ interests: { resources: { components: { ops: ['deploy'] } } }, match: null, has_secret: true });
    const rs = await cli(['webhooks', 'update', id, '--remove-secret', '--json'], env);
    expect(rs.code, both(rs)).toBe(0);
    expect(rs.json).toMatchObject({ has_secret: false, interests: { resources: { components: { ops: ['deploy'] } } } });

    const d = await cli(['webhooks', 'delete', id], env);
    expect(d.code, both(d)).toBe(0);
    const again = await cli(['webhooks', 'delete', id], env);
    expect(again.code, both(again)).toBe(1);
    const after = await cli(['webhooks', 'list', '--json'], env);
    expect(after.json.map((w: any) => w.webhook_id)).not.toContain(id);
  });

  it('ping delivers one signed ping', async () => {
    const c = await cli(['webhooks', 'create', '--url', `${rx.url}/ping`, '--secret', 'ping-secret', '--json'], env);
    expect(c.code, both(c)).toBe(0);
    const before = rx.requests.length;
    const p = await cli(['webhooks', 'ping', c.json.webhook_id, '--json'], env);
    expect(p.code, both(p)).toBe(0);
    expect(p.json).toMatchObject({ delivered: true, status: 200 });
    expect(Number.isInteger(p.json.duration_ms)).toBe(true);
    const got = rx.requests.slice(before).filter((q) => q.url === '/ping');
    expect(got).toHaveLength(1);
    expect(JSON.parse(got[0].body).type).toBe('com.svc.webhook.ping.v1');
    expect(got[0].headers['x-svc-signature']).toBe(createHmac('sha256', 'ping-secret').update(got[0].body).digest('hex'));
  });

  it('rotate with --secret-file - and --previous-secret-ttl: a ping verifies under both secrets; list shows it rotating; an ' +
    'undelivered ping exits 1', async () => {
    const OLD = 'whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD';
    const NEW = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
    // through the real binary: the secret comes through a real stdin pipe
    const c = await runCliProcess(['webhooks', 'create', '--url', `${rx.url}/rotate`, '--secret-file', '-', '--json'], env, `${OLD}\n`);
    expect(c.code, both(c)).toBe(0);
    const id = c.json.webhook_id;
    const u = await cli(['webhooks', 'update', id, '--secret-file', '-', '--previous-secret-ttl', '2h', '--json'], env, `${NEW}\n`);
    expect(u.code, both(u)).toBe(0);
    const expires = Date.parse(u.json.previous_secret_expires_at);
    expect(Math.abs(expires - (Date.now() + 2 * 3600_000))).toBeLessThan(60_000);
    expect(both(c) + both(u)).not.toContain('whsec_');

    const before = rx.requests.length;
    const p = await cli(['webhooks', 'ping', id, '--json'], env);
    expect(p.code, both(p)).toBe(0);
    const [got] = rx.requests.slice(before).filter((q) => q.url === '/rotate');
    const headers = got.headers as Record<string, string>;
    expect(headers['webhook-signature'].split(' ')).toHaveLength(2);
    expect(new Webhook(NEW).verify(got.body, headers)).toMatchObject({ type: 'com.svc.webhook.ping.v1' });
    expect(new Webhook(OLD).verify(got.body, headers)).toMatchObject({ type: 'com.svc.webhook.ping.v1' });
    expect(headers['x-svc-signature']).toBe(createHmac('sha256', NEW).update(got.body).digest('hex'));

    const list = await cli(['webhooks', 'list'], env);
    expect(list.code, both(list)).toBe(0);
    expect(list.stdout.split('\n')[0]).toMatch(/\bLAST\s+FAILS\s+ATTEMPTS\s+FAILURES\b/);
    expect(list.stdout).toMatch(new RegExp(`^${id}\\s+\\S+\\s+rotating\\s`, 'm'));

    const port = await closedPort();
    const dead = await cli(['webhooks', 'create', '--url', `http://127.0.0.1:${port}/gone`, '--json'], env);
    expect(dead.code, both(dead)).toBe(0);
    const fail = await cli(['webhooks', 'ping', dead.json.webhook_id], env);
    expect(fail.code, both(fail)).toBe(1);
    expect(fail.stdout).toMatch(/delivered:\s+no/);
    expect(fail.stderr).toMatch(/not delivered \(connection refused\)/);
  }, 120_000);

  it("API errors exit 1 and print the server's message; nothing is created", async () => {
    const before = (await cli(['webhooks', 'list', '--json'], env)).json.length;
    const bad = await cli(['webhooks', 'create', '--url', 'ftp://127.0.0.1/x'], env);
    expect(bad.code, both(bad)).toBe(1);
    expect(bad.stderr.trim().length).toBeGreaterThan(0);
    const dup1 = await cli(['webhooks', 'create', '--url', `${rx.url}/dup`], env);
    expect(dup1.code, both(dup1)).toBe(0);
    const dup2 = await cli(['webhooks', 'create', '--url', `${rx.url}/dup`], env);
    expect(dup2.code, both(dup2)).toBe(1);
    expect(dup2.stderr).toMatch(/409|conflict/);
    const unauth = await cli(['webhooks', 'list'], { ...env, SVC_API_TOKEN: 'svc_not_a_token_000000000000' });
    expect(unauth.code, both(unauth)).toBe(1);
    expect((await cli(['webhooks', 'list', '--json'], env)).json.length).toBe(before + 1);
  });

  /** The HTTP API directly, to set up apps, configs and installs. */
  async function http(method: string, p: string, body?: unknown): Promise<any> {
    const res = await fetch(`${url}${p}`, {
      method,
      headers: { authorization: `Bearer ${org.api_token}`, 'x-svc-org-id': org.org_id, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    if (!res.ok) throw new Error(`${method} ${p}: ${res.status} ${text}`);
    return text ? JSON.parse(text) : undefined;
  }
  /** Poll the HTTP API (cheap, unlike a CLI process per poll) until `fn` gives a value; the CLI's view of it is checked after. */
  async function until<T>(what: string, fn: () => Promise<T | undefined>, ms = 15_000): Promise<T> {
    const got = await waitFor(
      async () => {
        const v = await fn();
        return v === undefined ? undefined : { v };
      },
      ms,
      what,
    );
    return got.v;
  }
  const versionsOf = (id: string) => http('GET', `/v1/installs/${id}/app-config-versions`);
  const workflowOf = (id: string) => http('GET', `/v1/workflows/${id}`);
  const cfgBody = (image: string) => ({
    components: [
      { name: 'api', values: { image, replicas: 2 } },
      { name: 'db', values: { size: 's' } },
    ],
  });

  it('installs versions, rollback (--plan-only, --yes), diff, workflows get', { timeout: 60_000 }, async () => {
    const app = await http('POST', '/v1/apps', { name: 'cli-rb' });
    const v1 = await http('POST', `/v1/apps/${app.app_id}/configs`, cfgBody('api:1'));
    const v2 = await http('POST', `/v1/apps/${app.app_id}/configs`, cfgBody('api:2'));
    const inst = await http('POST', '/v1/installs', {
      app_id: app.app_id,
      name: 'rb-1',
      app_config_id: v2.app_config_id,
      labels: { ring: 'canary' },
    });
    const id = inst.install_id;
    await until('provisioned version', async () => ((await versionsOf(id))[0]?.status === 'succeeded' ? true : undefined));
    const provisioned = await cli(['installs', 'versions', id, '--json'], env);
    expect(provisioned.code, both(provisioned)).toBe(0);
    expect(provisioned.json).toMatchObject([{ version: 1, app_config_id: v2.app_config_id, status: 'succeeded' }]);
    const list = await cli(['installs', 'list'], env);
    expect(list.code, both(list)).toBe(0);
    expect(list.stdout).toMatch(new RegExp(`${id}\\s+rb-1\\s+${app.app_id}\\s+${v2.app_config_id}\\s+ring=canary`));

    const plan = await cli(['installs', 'rollback', id, '--app-config', v1.app_config_id, '--plan-only'], env);
    expect(plan.code, both(plan)).toBe(0);
    expect(plan.stdout).toContain('values.image: "api:2" -> "api:1"');
    expect(plan.stdout).not.toContain('replicas');
    const refused = await cli(['installs', 'rollback', id, '--app-config', v1.app_config_id], env);
    expect(refused.code, both(refused)).toBe(2);
    expect((await cli(['installs', 'versions', id, '--json'], env)).json).toHaveLength(1);

    const applied = await cli(['installs', 'rollback', id, '--app-config', v1.app_config_id, '--yes', '--json'], env);
    expect(applied.code, both(applied)).toBe(0);
    expect(applied.json).toMatchObject({ applied: true });
    const { workflow_id, version_id } = applied.json;
    await until('rollback version succeeded', async () => ((await versionsOf(id))[0]?.status === 'succeeded' ? true : undefined));
    const versions = (await cli(['installs', 'versions', id, '--json'], env)).json;
    expect(versions[0].status).toBe('succeeded');
    expect(versions[0]).toMatchObject({ version_id, app_config_id: v1.app_config_id, old_app_config_id: v2.app_config_id, workflow_id });
    const plainVersions = await cli(['installs', 'versions', id], env);
    expect(plainVersions.stdout).toContain(version_id);
    // install version 2 applied config v1 (from config v2); version 1 config v2
    expect(plainVersions.stdout).toMatch(
      new RegExp(`^2\\s+config v1\\s+${version_id}\\s+${v1.app_config_id}\\s+config v2\\s+${v2.app_config_id}\\s`, 'm'),
    );
    expect(plainVersions.stdout).toMatch(new RegExp(`^1\\s+config v2\\s+ver_\\w+\\s+${v2.app_config_id}\\s`, 'm'));
    for (const given of ['2', 'version:2', 'config:1']) {
      const d = await cli(['installs', 'diff', id, given], env);
      expect(d.code, `${given}: ${both(d)}`).toBe(0);
      expect(d.stdout).toMatch(new RegExp(`version_id:\\s+${version_id}`));
      expect(d.stdout).toMatch(/from:\s+config v2 /);
      expect(d.stdout).toContain('values.image: "api:2" -> "api:1"');
    }
    expect((await cli(['installs', 'diff', id, 'config:2'], env)).stdout).toMatch(/to:\s+config v2 /);

    const diff = await cli(['installs', 'diff', id, version_id], env);
    expect(diff.code, both(diff)).toBe(0);
    expect(diff.stdout).toMatch(/~ api/);
    expect(diff.stdout).toContain('values.image: "api:2" -> "api:1"');
    expect(diff.stdout).toMatch(/= db/);
    const missing = await cli(['installs', 'diff', id, 'ver_does_not_exist'], env);
    expect(missing.code, both(missing)).toBe(1);

    const wf = await cli(['workflows', 'get', workflow_id], env);
    expect(wf.code, both(wf)).toBe(0);
    expect(wf.stdout).toMatch(/type:\s+app_config_update/);
    expect(wf.stdout).toMatch(/^0\s+\S+\s+deploy api\s+succeeded/m);
    expect(wf.stdout).not.toContain('deploy db');
    const cancel = await cli(['workflows', 'cancel', workflow_id], env);
    expect(cancel.code, `cancelling a finished workflow is an API error: ${both(cancel)}`).toBe(1);
  });

  it('branches run with --skip-builds, then approve the group plan', async () => {
    const app = await http('POST', '/v1/apps', { name: 'cli-br' });
    const v1 = await http('POST', `/v1/apps/${app.app_id}/configs`, cfgBody('api:1'));
    const v2 = await http('POST', `/v1/apps/${app.app_id}/configs`, cfgBody('api:2'));
    const branch = await http('POST', `/v1/apps/${app.app_id}/branches`, {
      name: 'main',
      install_groups: [{ name: 'canary', selector: { match_labels: { ring: 'canary' } } }],
    });
    const inst = await http('POST', '/v1/installs', {
      app_id: app.app_id,
      name: 'br-1',
      app_config_id: v2.app_config_id,
      labels: { ring: 'canary' },
    });
    await until('provisioned', async () => ((await versionsOf(inst.install_id))[0]?.status === 'succeeded' ? true : undefined));
    const run = await cli(
      ['branches', 'run', app.app_id, branch.app_branch_id, '--app-config', v1.app_config_id, '--skip-builds', '--json'],
      env,
    );
    expect(run.code, both(run)).toBe(0);
    const wfId = run.json.workflow_id;
    expect(typeof wfId).toBe('string');
    await until('a step awaiting approval', async () => (await workflowOf(wfId)).steps.find((s: any) => s.status === 'awaiting_approval'));
    const step = (await cli(['workflows', 'get', wfId, '--json'], env)).json.steps.find((s: any) => s.status === 'awaiting_approval');
    expect(step.name).toBe('plan install group: canary');
    const shown = await cli(['workflows', 'get', wfId], env);
    expect(shown.stdout).toContain(`awaits approval: svc workflows approve|reject ${wfId} ${step.step_id}`);
    expect(shown.stdout).toContain(`br-1 (${inst.install_id}): ${v2.app_config_id} -> ${v1.app_config_id}`);
    const ok = await cli(['workflows', 'approve', wfId, step.step_id, '--note', 'looks good', '--json'], env);
    expect(ok.code, both(ok)).toBe(0);
    const again = await cli(['workflows', 'approve', wfId, step.step_id], env);
    expect(again.code, `approving an answered step: ${both(again)}`).toBe(1);
    await until(
      'branch run finished',
      async () => (['succeeded', 'failed', 'cancelled'].includes((await workflowOf(wfId)).status) ? true : undefined),
      20_000,
    );
    const done = await cli(['workflows', 'get', wfId, '--json'], env);
    expect(done.code, both(done)).toBe(0);
    expect(done.json.status).toBe('succeeded');
  }, 60_000);

  it("installs list on an org with no installs (another org sees none of this org's installs)", async () => {
    const o = await cli(['orgs', 'create', '--name', 'cli-empty', '--db', db]);
    expect(o.code, both(o)).toBe(0);
    const env2 = { SVC_API_URL: url, SVC_API_TOKEN: o.json.api_token, SVC_ORG_ID: o.json.org_id };
    const r = await cli(['installs', 'list', '--json'], env2);
    expect(r.code, both(r)).toBe(0);
    expect(r.json).toEqual([]);
    const plain = await cli(['installs', 'list'], env2);
    expect(plain.code, both(plain)).toBe(0);
  });
});
