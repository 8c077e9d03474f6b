// Opaque per-org cursors (CONTRACT 8): `next_cursor` of /v1/events and of a webhook's attempts is
// no global sequence. Org A's cursors say nothing of how much org B emitted in between; a cursor is
// good only for the list it came from (another org's, another webhook's, the other list's, an old
// plain number: 400, never a page of someone's data); paging still returns every row exactly once.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { insertEvent, saveAttempts } from '../../store/history.ts';
import { rid } from '../helpers/ids.ts';
import { startService, type ApiClient, type OrgCreds, type TestService } from '../helpers/service.ts';
import { post } from '../helpers/workflows.ts';

type Json = any;

const HOOKS = '/v1/orgs/current/webhooks';

describe('page cursors', () => {
  let svc: TestService;
  let a: OrgCreds;
  let b: OrgCreds;
  let apiA: ApiClient;
  let apiB: ApiClient;

  /** Events of an org kept in the history, as the engine keeps them (one row each, a global seq). */
  function emit(orgId: string, n: number): string[] {
    const db = svc.server.ctx.db;
    const ids: string[] = [];
    db.transaction(() => {
      for (let i = 0; i < n; i++) {
        const id = rid('evt');
        const subject = `${orgId}/workflow/wf_${i}/started`;
        const body = JSON.stringify({
          specversion: '1.0',
          id,
          source: '//t/ctl-api',
          type: 'com.svc.workflow.lifecycle.v1',
          subject,
          time: new Date().toISOString(),
          data: { i },
        });
        insertEvent(db, {
          event_id: id,
          org_id: orgId,
          type: 'com.svc.workflow.lifecycle.v1',
          subject,
          body,
          route: '{}',
          created_ms: svc.server.ctx.clock.now(),
        });
        ids.push(id);
      }
    })();
    return ids;
  }

  /** The seq each event id has in the shared table (what a leaking cursor would show). */
  const seqOf = (id: string) => (svc.server.ctx.db.prepare('SELECT seq FROM events WHERE event_id = ?').get(id) as { seq: number }).seq;

  async function allPages(api: ApiClient, p: string, limit: number): Promise<{ rows: Json[]; cursors: string[] }> {
    const rows: Json[] = [];
    const cursors: string[] = [];
    let after: string | null = null;
    do {
      const r: { status: number; body: Json; text: string } = await api.get(
        `${p}${p.includes('?') ? '&' : '?'}limit=${limit}${after ? `&after=${encodeURIComponent(after)}` : ''}`,
      );
      expect(r.status, r.text).toBe(200);
      rows.push(...r.body.data);
      after = r.body.next_cursor;
      if (after) cursors.push(after);
    } while (after);
    return { rows, cursors };
  }

  beforeAll(async () => {
    svc = await startService({ localRunner: false });
    a = svc.createOrg('cursor-a');
    b = svc.createOrg('cursor-b');
    apiA = svc.api(a);
    apiB = svc.api(b);
  });
  afterAll(async () => svc?.stop());

  it("A's cursors do not show B's volume; paging returns every event once; foreign and old cursors are 400", async () => {
    const first = emit(a.org_id, 10);
    const before = (await apiA.get('/v1/events?limit=5')).body;
    const bIds = emit(b.org_id, 1000);
    const later = emit(a.org_id, 10);
    const after = (await apiA.get('/v1/events?limit=5')).body;

    // the same row has the same cursor; nothing in it is the seq or B's count
    expect(after.next_cursor).toBe(before.next_cursor);
    const mark = seqOf(first[4]);
    for (const c of [before.next_cursor, after.next_cursor]) {
      expect(c).toMatch(/^[A-Za-z0-9_-]{22}$/);
      expect(c).not.toMatch(/^\d+$/); // not the plain seq (a digit of it may appear by chance in random bytes)
      const bytes = Buffer.from(c, 'base64url');
      const be = Buffer.alloc(8);
      be.writeBigUInt64BE(BigInt(mark));
      const le = Buffer.alloc(8);
      le.writeBigUInt64LE(BigInt(mark));
      expect(bytes.includes(be) || bytes.includes(le)).toBe(false);
    }
    // A's pages across B's 1,000 events: each A event exactly once, in order
    const paged = await allPages(apiA, '/v1/events', 3);
    expect(paged.rows.map((e) => e.id)).toEqual([...first, ...later]);
    // an org that starts after B's 1,000 events: its first cursor and A's, read as numbers in any
    // byte order, are no nearer than random values would be (a plain or merely encoded seq would be ~1,000 apart)
    const c = svc.createOrg('cursor-c');
    emit(c.org_id, 10);
    const cFirst = (await svc.api(c).get('/v1/events?limit=5')).body.next_cursor as string;
    expect(cFirst).toMatch(/^[A-Za-z0-9_-]{22}$/);
    const asNumbers = (x: string) => {
      const buf = Buffer.from(x, 'base64url');
      return [buf.readBigUInt64BE(0), buf.readBigUInt64LE(0), buf.readBigUInt64BE(8), buf.readBigUInt64LE(8)];
    };
    const [na, nc] = [asNumbers(before.next_cursor), asNumbers(cFirst)];
    for (let i = 0; i < na.length; i++) {
      const d = na[i] > nc[i] ? na[i] - nc[i] : nc[i] - na[i];
      expect(d > 2n ** 32n, `byte reading ${i}`).toBe(true);
    }

    // B's own pages: all 1,000, once each
    const bPaged = await allPages(apiB, '/v1/events', 500);
    expect(bPaged.rows.map((e) => e.id)).toEqual(bIds);

    // a cursor of B's list used by A: 400, never B's data
    for (const bad of [bPaged.cursors[0], String(seqOf(bIds[0])), '0', 'A'.repeat(22)]) {
      const r = await apiA.get(`/v1/events?after=${encodeURIComponent(bad)}`);
      expect(r.status, `${bad}: ${r.text}`).toBe(400);
      expect(r.body.error).toBe('invalid_request');
      expect(r.body.details[0].path).toBe('after');
    }
  });

  it("attempts: a webhook's cursor is good for that webhook's list only; paging is complete", async () => {
    const w1 = (await post(apiA, HOOKS, { webhook_url: 'https://receiver.example/1' })).webhook_id as string;
    const w2 = (await post(apiA, HOOKS, { webhook_url: 'https://receiver.example/2' })).webhook_id as string;
    const wb = (await post(apiB, HOOKS, { webhook_url: 'https://receiver.example/b' })).webhook_id as string;
    const now = Date.now();
    const row = (webhookId: string, orgId: string, i: number) => ({
      webhook_id: webhookId,
      org_id: orgId,
      event_id: `evt_${webhookId}_${i}`,
      type: 'com.svc.workflow.lifecycle.v1',
      attempted_ms: now + i,
      ok: i % 2 === 0,
      status_code: 200,
      error: null,
      duration_ms: 3,
      recovery_id: null,
      kept_ms: svc.server.ctx.clock.now(),
    });
    saveAttempts(svc.server.ctx.db, [
      ...Array.from({ length: 20 }, (_, i) => row(w1, a.org_id, i)),
      ...Array.from({ length: 500 }, (_, i) => row(wb, b.org_id, i)),
      ...Array.from({ length: 5 }, (_, i) => row(w2, a.org_id, i)),
    ]);
    const paged = await allPages(apiA, `${HOOKS}/${w1}/attempts`, 6);
    expect(paged.rows.map((x) => x.event_id)).toEqual(Array.from({ length: 20 }, (_, i) => `evt_${w1}_${19 - i}`));
    expect(paged.cursors.every((c) => /^[A-Za-z0-9_-]{22}$/.test(c))).toBe(true);
    // w1's cursor on w2, on the events list, and B's attempts cursor on A's webhook: 400
    const bCursor = (await apiB.get(`${HOOKS}/${wb}/attempts?limit=10`)).body.next_cursor as string;
    for (const [p, c] of [
      [`${HOOKS}/${w2}/attempts`, paged.cursors[0]],
      ['/v1/events', paged.cursors[0]],
      [`${HOOKS}/${w1}/attempts`, bCursor],
    ] as const) {
      const r = await apiA.get(`${p}?after=${encodeURIComponent(c)}`);
      expect(r.status, `${p}: ${r.text}`).toBe(400);
    }
  });
});
