// GET /v1/ingest/rejections (CONTRACT 9 "Durable ingest"): the facts the engine refused after ingest
// acknowledged them, newest first, the caller's org only, paged with opaque cursors; the fact as its
// JSON when it parses, else the text; bad query parameters 400 in the shape of CONTRACT 3; any token
// scope reads it; rows past --event-retention on the engine clock are neither listed nor kept.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDb } from '../../store/db.ts';
import { recordIngestRejections, type IngestRejectionInput } from '../../store/ingest-rejections.ts';
import { startService, waitFor, type ApiClient, type OrgCreds, type TestService } from '../helpers/service.ts';
import { ManualClock } from '../helpers/clock.ts';

type Json = any;

const T0 = Date.parse('2026-12-01T10:00:00.000Z');

/** Rows as the engine keeps them: in a transaction, here on a connection of the test's own. */
function record(dbFile: string, rows: IngestRejectionInput[]): void {
  const db = openDb(dbFile);
  try {
    db.transaction(() => recordIngestRejections(db, rows)).immediate();
  } finally {
    db.close();
  }
}

const rejection = (org: OrgCreds, n: number, fact = JSON.stringify({ type: 'workflow.started', workflow_id: `wf_${n}` })) => ({
  org_id: org.org_id,
  subject: `svc.ingest.${org.org_id}.workflow`,
  received_at: T0 + n * 1000,
  error: `workflow_id wf_${n} belongs to a workflow svc started`,
  fact,
});

let svc: TestService;
let orgA: OrgCreds;
let orgB: OrgCreds;
let A: ApiClient;
let B: ApiClient;

beforeAll(async () => {
  svc = await startService({}, { clock: new ManualClock(T0 + 60_000) });
  orgA = svc.createOrg('a');
  orgB = svc.createOrg('b');
  A = svc.api(orgA);
  B = svc.api(orgB);
  record(svc.db, [
    rejection(orgA, 1),
    rejection(orgB, 2),
    rejection(orgA, 3, 'not json {'),
    rejection(orgA, 4),
    { ...rejection(orgA, 5), subject: 'svc.ingest.x', error: 'bad', fact: '"a JSON string"' },
  ]);
}, 30_000);

afterAll(async () => {
  await svc?.stop();
});

describe('GET /v1/ingest/rejections', () => {
  it('lists the org newest first: subject, received_at (ISO 8601), error, and the fact as JSON or as the text', async () => {
    const r = await A.get('/v1/ingest/rejections');
    expect(r.status, r.text).toBe(200);
    expect(r.body.next_cursor).toBeNull();
    expect(r.body.data).toEqual([
      { subject: 'svc.ingest.x', received_at: '2026-12-01T10:00:05.000Z', error: 'bad', fact: 'a JSON string' },
      {
        subject: `svc.ingest.${orgA.org_id}.workflow`,
        received_at: '2026-12-01T10:00:04.000Z',
        error: 'workflow_id wf_4 belongs to a workflow svc started',
        fact: { type: 'workflow.started', workflow_id: 'wf_4' },
      },
      expect.objectContaining({ received_at: '2026-12-01T10:00:03.000Z', fact: 'not json {' }),
      expect.objectContaining({ received_at: '2026-12-01T10:00:01.000Z', fact: { type: 'workflow.started', workflow_id: 'wf_1' } }),
    ]);
  });

  it("never shows another org's rows, and another org's cursor is 400", async () => {
    const b = await B.get('/v1/ingest/rejections');
    expect(b.status, b.text).toBe(200);
    expect(b.body.data.map((x: Json) => x.error)).toEqual(['workflow_id wf_2 belongs to a workflow svc started']);
    const a = await A.get('/v1/ingest/rejections?limit=1');
    const foreign = await B.get(`/v1/ingest/rejections?after=${a.body.next_cursor}`);
    expect(foreign.status, foreign.text).toBe(400);
    expect(foreign.body).toMatchObject({ error: 'invalid_request', details: [{ path: 'after' }] });
  });

  it('pages with limit and the next_cursor (passed as after) to the end', async () => {
    const seen: string[] = [];
    let after: string | null = null;
    let pages = 0;
    do {
      const r: { status: number; text: string; body: Json } = await A.get(`/v1/ingest/rejections?limit=2${after ? `&after=${after}` : ''}`);
      expect(r.status, r.text).toBe(200);
      expect(r.body.data.length).toBeLessThanOrEqual(2);
      seen.push(...r.body.data.map((x: Json) => x.received_at.slice(17, 19)));
      after = r.body.next_cursor;
      pages++;
    } while (after);
    expect(seen).toEqual(['05', '04', '03', '01']);
    expect(pages).toBe(2);
  });

  it('refuses bad query parameters with 400 in the shape of CONTRACT 3', async () => {
    for (const q of ['limit=0', 'limit=501', 'limit=ten', 'after=nope', 'cursor=x', 'since=2h']) {
      const r = await A.get(`/v1/ingest/rejections?${q}`);
      expect(r.status, `${q}: ${r.text}`).toBe(400);
      expect(r.body.error, q).toBe('invalid_request');
      expect(typeof r.body.message, q).toBe('string');
      expect(Array.isArray(r.body.details), q).toBe(true);
    }
  });

  it('is read with any scope of the org (read), and not without the org', async () => {
    const reader = svc.createToken(orgA, 'read', 'status-page');
    const r = await svc.api(reader).get('/v1/ingest/rejections?limit=1');
    expect(r.status, r.text).toBe(200);
    expect(r.body.data).toHaveLength(1);
    const wrongOrg = await svc.api({ org_id: orgB.org_id, api_token: orgA.api_token }).get('/v1/ingest/rejections');
    expect(wrongOrg.status).toBe(403);
  });

  it('is in the OpenAPI document with its query and page schema, scope read', async () => {
    const doc = (await A.get('/v1/openapi.json')).body;
    const op = doc.paths['/v1/ingest/rejections'].get;
    expect(op.operationId).toBe('listIngestRejections');
    expect(op.parameters.map((p: Json) => p.name).sort()).toEqual(['after', 'limit']);
    expect(JSON.stringify(op)).toContain('IngestRejectionPage');
    expect(doc.components.schemas.IngestRejection.properties).toHaveProperty('fact');
    expect(JSON.stringify(op)).toMatch(/read/);
  });
});

describe('--event-retention', () => {
  it('rows received before the retention on the engine clock are not listed, and are pruned', async () => {
    const clock = new ManualClock(T0);
    const s = await startService({ eventRetentionMs: 60_000 }, { clock });
    try {
      const o = s.createOrg('kept');
      record(s.db, [
        { ...rejection(o, 0), received_at: T0 - 1000 },
        { ...rejection(o, 1), received_at: T0 + 30_000 },
      ]);
      const listed = async () => (await s.api(o).get('/v1/ingest/rejections')).body.data.map((x: Json) => x.received_at);
      expect(await listed()).toEqual(['2026-12-01T10:00:30.000Z', '2026-12-01T09:59:59.000Z']);
      clock.advance(60_000);
      expect(await listed()).toEqual(['2026-12-01T10:00:30.000Z']);
      clock.advance(1_000); // the prune runs every 60th of the retention (at least every second)
      await waitFor(
        () => {
          const db = openDb(s.db);
          try {
            return (db.prepare('SELECT COUNT(*) AS n FROM ingest_rejections').get() as { n: number }).n === 1;
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
