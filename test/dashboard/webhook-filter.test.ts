// The dashboard's webhook form takes a filter (CONTRACT 10.2), over plain HTTP with a real svc: a
// filter whose path no admitted event type has is answered 400 with the form again, its message
// naming the path, and nothing is created; a valid one is saved and shown in the form.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dashboardSession } from '../helpers/dashboard.ts';
import { startService, waitFor, type TestService } from '../helpers/service.ts';
import { rid } from '../helpers/ids.ts';

describe('dashboard: the webhook form takes a filter', () => {
  let svc: TestService;

  beforeAll(async () => {
    svc = await startService({ localRunner: false });
  });
  afterAll(async () => {
    await svc?.stop();
  });

  it('a filter with an unknown path is shown back with its message; a valid one is saved and shown', async () => {
    const org = svc.createOrg(rid('dash-filter'));
    const api = svc.api(org);
    const s = await dashboardSession(`${svc.url}/dashboard`, org);
    const page = `/${org.org_id}/webhooks/new`;
    const bad = await s.submit(page, `/${org.org_id}/webhooks`, {
      webhook_url: 'https://receiver.example/h',
      all_events: '1',
      filter: '{"data": {"stepp": {"name": "x"}}}',
    });
    expect(bad.status).toBe(400);
    const html = await bad.text();
    expect(html).toContain('filter.data.stepp.name');
    expect(html).toMatch(/no event type these interests admit has data\.stepp\.name/);
    // the form keeps what was typed
    expect(html).toContain('stepp');
    expect((await api.get('/v1/orgs/current/webhooks')).body).toEqual([]);

    const ok = await s.submit(page, `/${org.org_id}/webhooks`, {
      webhook_url: 'https://receiver.example/h',
      all_events: '1',
      filter: '{"data": {"transition": {"$in": ["failed"]}}}',
    });
    expect(ok.status).toBe(303);
    const [w] = (await api.get('/v1/orgs/current/webhooks')).body;
    expect(w.filter).toEqual({ data: { transition: { $in: ['failed'] } } });
    // two events of the last day: the page says what the filter would have received of them
    const workflow = { id: rid('wfx'), type: 'manual_deploy', owner_id: 'inst_d', owner_type: 'installs' };
    for (const msg of [
      { kind: 'workflow', transition: 'started', workflow },
      { kind: 'workflow', transition: 'failed', error: 'x' },
    ]) {
      const r = await svc.server.bus.request(`svc.ingest.${org.org_id}.workflows.${workflow.id}`, JSON.stringify(msg), { timeoutMs: 5000 });
      expect(r.json()).toEqual({ ok: true });
    }
    await waitFor(async () => (await api.get('/v1/events')).body.data.length === 2, 10_000, 'both events kept');
    const form = await (await s.get(`/${org.org_id}/webhooks/${w.webhook_id}`)).text();
    expect(form).toMatch(/<textarea id="filter"[^>]*>[^<]*&quot;\$in&quot;/);
    expect(form).toMatch(/would have received 1 of 2 events/);
    // the event page says which webhooks it goes to now, and why
    const [started] = (await api.get('/v1/events')).body.data;
    expect(started.data.transition).toBe('started');
    const page2 = await (await s.get(`/${org.org_id}/events/${started.id}`)).text();
    expect(page2).toMatch(/Recipients now/);
    expect(page2).toMatch(new RegExp(`data-webhook-id="${w.webhook_id}"[\\s\\S]*?no[\\s\\S]*?data\\.transition\\.\\$in`));
  });
});
