// Requests refused for their size (413) are in the audit log like other refused writes (CONTRACT 8):
// an API write over 1 MiB (with content-length, or chunked) by a known token is kept for the token's
// org, named by the route it was for, with status 413 and its actor; nothing of the body is kept.
// The dashboard's: a form over 1 MiB, or a sign-in over 8 KiB, posted by a signed-in session, kept
// for the session's org. Without a known token or session there is no org to keep it for: still 413.
import http from 'node:http';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startService, type ApiClient, type OrgCreds, type TestService } from '../helpers/service.ts';
import { dashboardSession, type DashboardSession } from '../helpers/dashboard.ts';

type Json = any;

const MiB = 1024 * 1024;
const HOOKS = '/v1/orgs/current/webhooks';
const MARK = 'BODY-MARK-5d1c0e-never-in-the-log';

let svc: TestService;
let org: OrgCreds;
let admin: ApiClient;
let hooks: OrgCreds & { token_id: string };
let webhookId: string;

/** The org's whole audit log, oldest first. */
async function auditLog(): Promise<Json[]> {
  const r = await admin.get('/v1/audit?limit=500');
  expect(r.status, r.text).toBe(200);
  return r.body.data;
}

/** A request whose body is sent chunked (no content-length); the server may answer before it has read it all. */
function sendChunked(method: string, p: string, headers: Record<string, string>, body: Buffer): Promise<number> {
  return new Promise((resolve, reject) => {
    const u = new URL(svc.url);
    const req = http.request(
      { host: u.hostname, port: u.port, path: p, method, headers: { ...headers, 'transfer-encoding': 'chunked' } },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('error', (err) => setTimeout(() => reject(err), 2000));
    req.end(body);
  });
}

beforeAll(async () => {
  svc = await startService();
  org = svc.createOrg('too-large');
  admin = svc.api(org);
  hooks = svc.createToken(org, 'webhooks', 'ci-hooks');
  const r = await svc.api(hooks).post(HOOKS, { webhook_url: 'http://127.0.0.1:9/hook' });
  expect(r.status, r.text).toBe(201);
  webhookId = r.body.webhook_id;
});

afterAll(async () => {
  await svc?.stop();
});

describe('413 in the audit log', () => {
  it('an API write over 1 MiB by a known token: kept with its route, actor and 413; nothing of its body', async () => {
    const before = (await auditLog()).length;
    const big = JSON.stringify({ webhook_url: 'http://127.0.0.1:9/x', secret: MARK }) + ' '.repeat(MiB);
    const H = svc.api(hooks);
    // with content-length: refused before it is read
    const create = await H.raw('POST', HOOKS, { body: big, headers: { 'content-type': 'application/json' } });
    expect(create.status).toBe(413);
    expect(create.body.error).toBe('payload_too_large');
    // chunked: refused once 1 MiB of it is read
    const patch = await sendChunked(
      'PATCH',
      `${HOOKS}/${webhookId}`,
      { authorization: `Bearer ${hooks.api_token}`, 'x-svc-org-id': hooks.org_id, 'content-type': 'application/json' },
      Buffer.from(big),
    );
    expect(patch).toBe(413);

    const added = (await auditLog()).slice(before);
    expect(
      added.map((e) => ({
        action: e.action,
        resource_type: e.resource_type,
        resource_id: e.resource_id,
        status: e.status,
        actor: e.actor,
      })),
    ).toEqual([
      {
        action: 'webhooks.create',
        resource_type: 'webhook',
        resource_id: null,
        status: 413,
        actor: { token_id: hooks.token_id, token_name: 'ci-hooks' },
      },
      {
        action: 'webhooks.update',
        resource_type: 'webhook',
        resource_id: webhookId,
        status: 413,
        actor: { token_id: hooks.token_id, token_name: 'ci-hooks' },
      },
    ]);
    // nothing of the bodies anywhere in the table
    const h = new Database(svc.db, { readonly: true });
    try {
      const rows = h.prepare('SELECT * FROM audit_log').all();
      expect(JSON.stringify(rows)).not.toContain(MARK);
    } finally {
      h.close();
    }
  });

  it('without a known token (no org to keep it for), or a read: 413 or 401 as before, and no row', async () => {
    const before = (await auditLog()).length;
    const big = ' '.repeat(MiB + 1);
    const stranger = await fetch(svc.url + HOOKS, {
      method: 'POST',
      headers: { authorization: 'Bearer svc_nope', 'x-svc-org-id': org.org_id, 'content-type': 'application/json' },
      body: big,
    });
    expect(stranger.status).toBe(413);
    const anonymous = await fetch(svc.url + HOOKS, { method: 'POST', headers: { 'content-type': 'application/json' }, body: big });
    expect(anonymous.status).toBe(413);
    expect((await auditLog()).length).toBe(before);
  });

  describe('the dashboard', () => {
    let dash: string;
    let session: DashboardSession;

    beforeAll(async () => {
      dash = `${svc.url}/dashboard`;
      session = await dashboardSession(dash, hooks);
    });

    const postForm = (p: string, body: string, cookie?: string) =>
      fetch(dash + p, {
        method: 'POST',
        redirect: 'manual',
        headers: { 'content-type': 'application/x-www-form-urlencoded', ...(cookie ? { cookie } : {}) },
        body,
      });

    it("a form over 1 MiB and a sign-in over 8 KiB from a signed-in session: kept for the session's org", async () => {
      const before = (await auditLog()).length;
      const form = await postForm(`/${org.org_id}/webhooks`, `webhook_url=x&secret=${MARK}&pad=${'p'.repeat(MiB)}`, session.cookie);
      expect(form.status).toBe(413);
      const signIn = await postForm('/login', `org_id=${org.org_id}&api_token=${MARK}&pad=${'p'.repeat(8 * 1024)}`, session.cookie);
      expect(signIn.status).toBe(413);

      const added = (await auditLog()).slice(before);
      expect(
        added.map((e) => ({
          action: e.action,
          resource_type: e.resource_type,
          resource_id: e.resource_id,
          status: e.status,
          actor: e.actor,
        })),
      ).toEqual([
        {
          action: 'dashboard.post',
          resource_type: 'dashboard_page',
          resource_id: `/${org.org_id}/webhooks`,
          status: 413,
          actor: { token_id: hooks.token_id, token_name: 'ci-hooks' },
        },
        {
          action: 'dashboard.post',
          resource_type: 'dashboard_page',
          resource_id: '/login',
          status: 413,
          actor: { token_id: hooks.token_id, token_name: 'ci-hooks' },
        },
      ]);
      expect(JSON.stringify(added)).not.toContain(MARK);
    });

    it('a sign-in over 8 KiB without a session: 413, and no row (no org is known)', async () => {
      const before = (await auditLog()).length;
      const r = await postForm('/login', `org_id=${org.org_id}&pad=${'p'.repeat(8 * 1024)}`);
      expect(r.status).toBe(413);
      expect((await auditLog()).length).toBe(before);
    });
  });
});
