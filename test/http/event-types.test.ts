// The event catalog over HTTP (CONTRACT 10.3): GET /v1/event-types (any token), GET
// /v1/event-types/{type}/schema (no auth, `$id` its absolute URL under --base-url, 404 for an
// unknown type), and POST …/webhooks/{id}/examples: one signed example of a type to that webhook
// alone, marked `svcexample`, without `svcorderkey`/`sequence`, never in the history, counted like
// a ping. A real svc, a real receiver, the stock standardwebhooks library and ajv.
import { Webhook } from 'standardwebhooks';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startReceiver, type Receiver } from '../helpers/receiver.ts';
import { startService, waitFor, type ApiClient, type OrgCreds, type TestService } from '../helpers/service.ts';
import { EVENT_TYPES } from '../../src/events/catalog.ts';

type Json = any;
const HOOKS = '/v1/orgs/current/webhooks';
const SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
const BASE = 'https://svc.example.test:9443';
const TYPES = [...EVENT_TYPES.keys()];

let svc: TestService;
let rx: Receiver;
let org: OrgCreds;
let api: ApiClient;
let hookId: string;
let otherId: string;

beforeAll(async () => {
  svc = await startService({ baseUrl: BASE });
  rx = await startReceiver();
  org = svc.createOrg('catalog');
  api = svc.api(org);
  const created = await api.post(HOOKS, {
    webhook_url: rx.hook('ex'),
    secret: SECRET,
    interests: { resources: { installs: { ops: ['provision'] } } },
  });
  expect(created.status, created.text).toBe(201);
  hookId = created.body.webhook_id;
  const other = await api.post(HOOKS, { webhook_url: rx.hook('other'), interests: { all_events: true } });
  otherId = other.body.webhook_id;
});
afterAll(async () => {
  await svc?.stop();
  await rx?.close();
});

describe('GET /v1/event-types', () => {
  it('lists every type with description, subject pattern, schema URL under --base-url and an example of the caller’s org; any token', async () => {
    const read = svc.api(svc.createToken(org, 'read'));
    const r = await read.get('/v1/event-types');
    expect(r.status, r.text).toBe(200);
    expect(r.body.map((t: Json) => t.type)).toEqual(TYPES);
    for (const t of r.body) {
      expect(Object.keys(t)).toEqual(['type', 'description', 'subject_pattern', 'schema_url', 'example']);
      expect(t.schema_url).toBe(`${BASE}/v1/event-types/${t.type}/schema`);
      expect(t.example).toMatchObject({
        type: t.type,
        dataschema: t.schema_url,
        svcorgid: org.org_id,
        source: '//svc.example.test:9443/ctl-api',
      });
    }
    expect(r.body.map((t: Json) => t.type)).toEqual(expect.arrayContaining(['com.svc.webhook.ping.v1', 'com.svc.rollout.verification.v1']));
    const anon = await fetch(`${svc.url}/v1/event-types`);
    expect(anon.status).toBe(401);
  });
});

describe('GET /v1/event-types/{type}/schema', () => {
  it('no auth: the JSON Schema with its own URL as $id; each listed example validates against it (ajv 2020-12)', async () => {
    const list = (await api.get('/v1/event-types')).body as Json[];
    const ajv = new Ajv2020({ strict: true });
    for (const t of list) {
      // fetched where the events say: their dataschema is served here under --base-url's path
      const res = await fetch(`${svc.url}${new URL(t.schema_url).pathname}`);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/application\/json/);
      const doc = await res.json();
      expect(doc.$id).toBe(t.schema_url);
      expect(doc.$schema).toBe('https://json-schema.org/draft/2020-12/schema');
      expect(doc.title).toBe(t.type);
      const validate = ajv.compile(doc);
      expect(validate(t.example), `${t.type}: ${ajv.errorsText(validate.errors)}`).toBe(true);
    }
  });

  it('an unknown type is 404 not_found', async () => {
    const res = await fetch(`${svc.url}/v1/event-types/com.svc.nope.v1/schema`);
    expect(res.status).toBe(404);
    expect(await res.json()).toMatchObject({ error: 'not_found', message: 'event type com.svc.nope.v1 not found' });
  });
});

describe('POST …/webhooks/{id}/examples', () => {
  it('each type arrives once at that webhook alone, signed, marked svcexample, no order key or sequence, valid, absent from the history', async () => {
    const before = (await api.get(`${HOOKS}/${hookId}`)).body.delivery_status.attempts_total;
    const ajv = new Ajv2020({ strict: true });
    const schemas = new Map<string, (v: unknown) => boolean>();
    for (const type of TYPES) {
      const r = await api.post(`${HOOKS}/${hookId}/examples`, { type });
      expect(r.status, r.text).toBe(200);
      expect(r.body).toMatchObject({ delivered: true, status: 200 });
    }
    const got = rx.at('ex');
    expect(got.map((g) => g.json.type)).toEqual(TYPES);
    for (const g of got) {
      // the stock library, as a receiver verifies: body, webhook-id, webhook-timestamp, webhook-signature
      expect(new Webhook(SECRET).verify(g.raw, g.headers as Record<string, string>)).toEqual(g.json);
      expect(g.headers['webhook-id']).toBe(g.json.id);
      expect(g.json.svcexample).toBe(true);
      expect(g.json).not.toHaveProperty('svcorderkey');
      expect(g.json).not.toHaveProperty('sequence');
      expect(g.json.svcorgid).toBe(org.org_id);
      let v = schemas.get(g.json.dataschema);
      if (!v) {
        v = ajv.compile(await (await fetch(`${svc.url}${new URL(g.json.dataschema).pathname}`)).json());
        schemas.set(g.json.dataschema, v);
      }
      expect(v(g.json), g.json.type).toBe(true);
    }
    expect(new Set(got.map((g) => g.json.id)).size).toBe(TYPES.length);
    expect(rx.at('other')).toEqual([]); // that webhook alone, though the other one takes all events
    // never kept; counted like pings in the delivery status
    for (const g of got) expect((await api.get(`/v1/events/${g.json.id}`)).status).toBe(404);
    const events = (await api.get('/v1/events')).body.data as Json[];
    expect(events.filter((e) => e.svcexample)).toEqual([]);
    await waitFor(
      async () => (await api.get(`${HOOKS}/${hookId}`)).body.delivery_status.attempts_total === before + TYPES.length,
      5000,
      'the examples counted in the delivery status',
    );
    const attempts = (await api.get(`${HOOKS}/${hookId}/attempts?limit=100`)).body.data as Json[];
    expect(attempts.map((a) => a.event_id).sort()).toEqual(got.map((g) => g.json.id).sort());
  });

  it('an unknown type is 400 naming the known ones; an unknown webhook 404; nothing is sent', async () => {
    const n = rx.all.length;
    const bad = await api.post(`${HOOKS}/${hookId}/examples`, { type: 'com.svc.deploy.v1' });
    expect(bad.status).toBe(400);
    expect(bad.body.error).toBe('invalid_request');
    expect(bad.body.message).toContain('unknown event type com.svc.deploy.v1; known types: com.svc.workflow.lifecycle.v1, ');
    for (const t of TYPES) expect(bad.body.message).toContain(t);
    expect(bad.body.details).toEqual([{ path: 'type', message: expect.stringContaining('one of com.svc.workflow.lifecycle.v1') }]);
    expect((await api.post(`${HOOKS}/${hookId}/examples`, {})).status).toBe(400);
    expect((await api.post(`${HOOKS}/${hookId}/examples`, { type: 'com.svc.webhook.ping.v1', extra: 1 })).status).toBe(400);
    expect((await api.post(`${HOOKS}/wh_nope/examples`, { type: 'com.svc.webhook.ping.v1' })).status).toBe(404);
    const read = svc.api(svc.createToken(org, 'read', 'reader'));
    expect((await read.post(`${HOOKS}/${hookId}/examples`, { type: 'com.svc.webhook.ping.v1' })).status).toBe(403);
    expect(rx.all.length).toBe(n);
    void otherId;
  });
});
