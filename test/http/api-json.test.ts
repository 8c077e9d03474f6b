// JSON bodies: keys that would rewire prototypes are refused, not silently dropped.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startService, type TestService, type OrgCreds } from '../helpers/service.ts';

let svc: TestService;
let org: OrgCreds;
beforeAll(async () => {
  svc = await startService();
  org = svc.createOrg();
});
afterAll(() => svc.stop());

describe('__proto__ keys', () => {
  it('a match label named __proto__ is a 400 and creates nothing', async () => {
    const api = svc.api(org);
    const body = '{"webhook_url":"http://127.0.0.1:9/x","match":{"installs":{"selector":{"match_labels":{"__proto__":"x","env":"p"}}}}}';
    const r = await api.raw('POST', '/v1/orgs/current/webhooks', { body, headers: { 'content-type': 'application/json' } });
    expect(r.status).toBe(400);
    expect(r.body.error).toBe('invalid_request');
    expect(JSON.stringify(r.body.details)).toContain('__proto__');
    expect((await api.get('/v1/orgs/current/webhooks')).body).toEqual([]);
  });

  it('labels of an install named __proto__ are a 400 too', async () => {
    const api = svc.api(org);
    const app = await api.post('/v1/apps', { name: 'a' });
    const r = await api.raw('POST', `/v1/apps/${app.body.app_id}/configs`, {
      body: '{"components":[{"name":"api","labels":{"__proto__":{"polluted":true}}}]}',
      headers: { 'content-type': 'application/json' },
    });
    expect(r.status).toBe(400);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });
});
