// Event history, attempt logs, recover and resend (CONTRACT 4.5), over the API with real receivers,
// in embedded mode (the SQLite outbox is the queue) and in NATS mode (JetStream SVC_EVENTS).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../helpers/clock.ts';
import { openDb } from '../../store/db.ts';
import { startNatsServer, findNatsServer, type NatsServerHandle } from '../helpers/nats-server.ts';
import { startReceiver, type Receiver } from '../helpers/receiver.ts';
import { startService, waitFor, type ApiClient, type OrgCreds, type TestService } from '../helpers/service.ts';
import { metric } from '../helpers/ledger.ts';
import { get, post, waitWf } from '../helpers/workflows.ts';

type Json = any;

const HOOKS = '/v1/orgs/current/webhooks';
const modes = findNatsServer() ? (['embedded', 'nats'] as const) : (['embedded'] as const);

describe.each(modes)('event history, attempts, recover and resend (%s mode)', (mode) => {
  let nats: NatsServerHandle | null = null;
  let svc: TestService;
  let rx: Receiver;
  let org: OrgCreds;
  let other: OrgCreds;
  let api: ApiClient;
  let otherApi: ApiClient;
  let appId: string;
  const clock = new ManualClock(Date.now());
  const t0 = clock.now();

  /** Provision one install and wait for its workflow to end and its events to be delivered: its id and events. */
  async function provision(name: string): Promise<{ installId: string; events: Json[] }> {
    const before = (await svc.events(org.org_id)).length;
    const inst = await post(api, '/v1/installs', { app_id: appId, name });
    const wfs = await get(api, `/v1/installs/${inst.install_id}/workflows`);
    expect((await waitWf(api, wfs[0].workflow_id)).status).toBe('succeeded');
    await svc.settled(20_000);
    return { installId: inst.install_id, events: (await svc.events(org.org_id)).slice(before) };
  }

  /** Every page of a list, following next_cursor. */
  async function allPages(p: string): Promise<Json[]> {
    const out: Json[] = [];
    let after: string | null = null;
    do {
      const r: { status: number; body: Json; text: string } = await api.get(
        `${p}${p.includes('?') ? '&' : '?'}limit=7${after ? `&after=${after}` : ''}`,
      );
      expect(r.status, r.text).toBe(200);
      expect(r.body.data.length).toBeLessThanOrEqual(7);
      out.push(...r.body.data);
      after = r.body.next_cursor;
    } while (after);
    return out;
  }

  beforeAll(async () => {
    if (mode === 'nats') nats = await startNatsServer();
    rx = await startReceiver();
    // a retention of 1 h: the last test moves the engine's clock past it (the local runner's
    // heartbeats run on it too, so 7 days would be 60 000 of them)
    svc = await startService({ eventRetentionMs: 3_600_000, ...(nats ? { natsUrl: nats.url } : {}) }, { clock });
    org = svc.createOrg('history');
    other = svc.createOrg('other');
    api = svc.api(org);
    otherApi = svc.api(other);
    const app = await post(api, '/v1/apps', { name: 'shop' });
    appId = app.app_id;
    await post(api, `/v1/apps/${appId}/configs`, { components: [{ name: 'api' }] });
  });
  afterAll(async () => {
    await svc?.stop();
    await rx?.close();
    await nats?.stop();
  });

  let hook: string;
  let emitted: Json[];
  let first: { installId: string; events: Json[] };

  it('GET /v1/events returns every emitted event exactly as delivered, oldest first, with pagination and filters, in the org only', async () => {
    hook = (await post(api, HOOKS, { webhook_url: rx.hook('all') })).webhook_id;
    first = await provision('eu-1');
    await provision('eu-2');
    emitted = await svc.events(org.org_id);
    expect(emitted.length).toBeGreaterThanOrEqual(2 * 4); // a workflow and its steps, each started and succeeded

    const list = await get(api, '/v1/events?limit=500');
    expect(list.next_cursor).toBeNull();
    expect(list.data.map((e: Json) => e.id)).toEqual(emitted.map((e) => e.id));
    // exactly as delivered: the same JSON the receiver got
    const delivered = new Map(rx.at('all').map((r) => [r.json.id, r.json]));
    for (const e of list.data) expect(e).toEqual(delivered.get(e.id));

    // pagination: pages of 7 give the same list
    expect((await allPages('/v1/events')).map((e) => e.id)).toEqual(emitted.map((e) => e.id));

    // filters
    const type = emitted[0].type;
    const ofType = await get(api, `/v1/events?type=${encodeURIComponent(type)}`);
    expect(ofType.data.map((e: Json) => e.id)).toEqual(emitted.filter((e) => e.type === type).map((e) => e.id));
    const prefix = emitted[0].subject.split('/').slice(0, 3).join('/');
    const bySubject = await get(api, `/v1/events?subject_prefix=${encodeURIComponent(prefix)}`);
    expect(bySubject.data.length).toBeGreaterThan(0);
    expect(bySubject.data.length).toBeLessThan(emitted.length);
    expect(bySubject.data.map((e: Json) => e.id)).toEqual(emitted.filter((e) => e.subject.startsWith(prefix)).map((e) => e.id));
    expect((await get(api, '/v1/events?since=1h')).data.length).toBe(emitted.length);
    const future = new Date(clock.now() + 60_000).toISOString();
    expect((await get(api, `/v1/events?since=${future}`)).data).toEqual([]);
    expect((await get(api, `/v1/events?until=${encodeURIComponent(new Date(clock.now() - 3_600_000).toISOString())}`)).data).toEqual([]);

    // one event
    const one = await get(api, `/v1/events/${emitted[3].id}`);
    expect(one).toEqual(delivered.get(emitted[3].id));

    // org scoping: another org sees none of them, and an id of this org is 404 there
    expect((await get(otherApi, '/v1/events')).data).toEqual([]);
    expect((await otherApi.get(`/v1/events/${emitted[3].id}`)).status).toBe(404);
    expect((await api.get('/v1/events/nope')).status).toBe(404);

    // bad queries: 400, naming the parameter
    for (const q of ['limit=0', 'limit=501', 'limit=x', 'since=yesterday', 'after=abc', 'colour=red']) {
      const r = await api.get(`/v1/events?${q}`);
      expect(r.status, q).toBe(400);
      expect(r.body.error).toBe('invalid_request');
    }
  });

  it('GET …/attempts lists each attempt, newest first, with filters and pagination', async () => {
    // outcomes come back from the data plane in batches: wait for the last ones
    await waitFor(
      async () => (await get(api, `${HOOKS}/${hook}/attempts?limit=500`)).data.length >= emitted.length,
      5000,
      'the attempt log',
    );
    const attempts = await allPages(`${HOOKS}/${hook}/attempts`);
    expect(attempts.length).toBe(emitted.length);
    expect(new Set(attempts.map((a) => a.event_id))).toEqual(new Set(emitted.map((e) => e.id)));
    const times = attempts.map((a) => a.attempted_at);
    expect([...times].sort().reverse()).toEqual(times);
    const a = attempts[0];
    expect(a).toMatchObject({ outcome: 'success', status_code: 200, error: null, recovery_id: null });
    expect(a.subject).toBe(emitted.find((e) => e.id === a.event_id).subject);
    expect((await get(api, `${HOOKS}/${hook}/attempts?outcome=failure`)).data).toEqual([]);
    const byEvent = await get(api, `${HOOKS}/${hook}/attempts?event_id=${emitted[0].id}`);
    expect(byEvent.data.map((x: Json) => x.event_id)).toEqual([emitted[0].id]);
    expect((await otherApi.get(`${HOOKS}/${hook}/attempts`)).status).toBe(404);
    expect((await api.get(`${HOOKS}/${hook}/attempts?outcome=maybe`)).status).toBe(400);
  });

  it('recover after a receiver was down: only the failed and missed events come, once each, with X-Svc-Recovery; a second recover finds nothing', async () => {
    clock.advance(60_000);
    const since = new Date(clock.now()).toISOString(); // the events before it are outside the window
    const down = (await post(api, HOOKS, { webhook_url: rx.hook('down') })).webhook_id;
    rx.set('down', { status: 503 });
    // the watchdog's events about `down` (failing, then recovered: CONTRACT 4.1) never go to it
    const toDown = (events: Json[]) => events.filter((e) => e.type !== 'com.svc.webhook.delivery.v1').map((e) => e.id);
    const failedIds = toDown((await provision('eu-3')).events); // fail at `down`
    rx.set('down', { status: 200 });
    const okIds = toDown((await provision('eu-4')).events); // get through
    const all = await svc.events(org.org_id);
    const n = failedIds.length;
    // outcomes reach the attempt log in batches: wait for all of them
    await waitFor(
      async () => (await get(api, `${HOOKS}/${down}/attempts?limit=500`)).data.length === n + okIds.length,
      5000,
      'the attempt log',
    );

    const failures = await get(api, `${HOOKS}/${down}/attempts?outcome=failure`);
    expect(new Set(failures.data.map((a: Json) => a.event_id))).toEqual(new Set(failedIds));
    expect(failures.data[0]).toMatchObject({ outcome: 'failure', status_code: 503 });

    const seen = rx.at('down').length;
    const successesBefore = await metric(svc.url, 'svc_recovery_attempts_total', { outcome: 'success' });
    const r = await api.post(`${HOOKS}/${down}/recover`, { since });
    expect(r.status, r.text).toBe(202);
    expect(r.body.events).toBe(n);
    const id = r.body.recovery_id;
    const done = await waitFor(
      async () => {
        const st = await get(api, `${HOOKS}/${down}/recoveries/${id}`);
        return st.state === 'done' ? st : null;
      },
      15_000,
      'the recovery to finish',
    );
    expect(done).toEqual({ recovery_id: id, state: 'done', events: n, attempted: n, succeeded: n, failed: 0 });
    await svc.settled(10_000);

    const recovered = rx.at('down').slice(seen);
    expect(recovered.map((x) => x.json.id).sort()).toEqual([...failedIds].sort());
    const bodies = new Map(rx.at('all').map((x) => [x.json.id, x.raw.toString('utf8')]));
    for (const x of recovered) {
      expect(x.headers['x-svc-recovery']).toBe(id);
      expect(x.headers['webhook-id']).toBe(x.json.id);
      expect(x.raw.toString('utf8')).toBe(bodies.get(x.json.id)); // the event's own body
    }
    // the hook that got everything is not touched by a recovery of another webhook (it was created
    // without interests: it gets every event but the watchdog's, src/domain/webhook-entry.ts)
    expect(rx.at('all').length).toBe(all.filter((e) => e.type !== 'com.svc.webhook.delivery.v1').length);
    expect(await metric(svc.url, 'svc_recovery_attempts_total', { outcome: 'success' })).toBe(successesBefore + n);
    const recAttempts = await get(api, `${HOOKS}/${down}/attempts?limit=${n}`);
    expect(recAttempts.data.every((a: Json) => a.recovery_id === id && a.outcome === 'success')).toBe(true);

    // everything got through now: nothing left to recover
    await waitFor(
      async () => (await get(api, `${HOOKS}/${down}/attempts?limit=500`)).data.length === 2 * n + okIds.length,
      5000,
      'the attempt log',
    );
    const again = await post(api, `${HOOKS}/${down}/recover`, { since }, 202);
    expect(again.events).toBe(0);
    expect((await get(api, `${HOOKS}/${down}/recoveries/${again.recovery_id}`)).state).toBe('done');

    // a webhook created after the events missed them all: those it matches now come (here: one install's)
    const late = (await post(api, HOOKS, { webhook_url: rx.hook('late'), match: { installs: { ids: [first.installId] } } })).webhook_id;
    const lateRec = await post(api, `${HOOKS}/${late}/recover`, { since: '1h', backfill: true }, 202);
    const wanted = first.events;
    expect(lateRec.events).toBe(wanted.length);
    await waitFor(() => rx.at('late').length >= wanted.length, 15_000, 'the late webhook to get its recovery');
    await svc.settled(10_000);
    expect(
      rx
        .at('late')
        .map((x) => x.json.id)
        .sort(),
    ).toEqual(wanted.map((e) => e.id).sort());

    // bad input changes nothing
    expect((await api.post(`${HOOKS}/${down}/recover`, {})).status).toBe(400);
    expect((await api.post(`${HOOKS}/${down}/recover`, { since: 'soon' })).status).toBe(400);
    expect((await otherApi.post(`${HOOKS}/${down}/recover`, { since: '1h' })).status).toBe(404);
    expect((await otherApi.get(`${HOOKS}/${down}/recoveries/${id}`)).status).toBe(404);
  });

  it('resend sends one kept event now, with X-Svc-Recovery: resend, counted in delivery_status and the attempt log', async () => {
    const ev = emitted[2];
    const w0 = await get(api, `${HOOKS}/${hook}`);
    const seen = rx.at('all').length;
    const r = await api.post(`${HOOKS}/${hook}/resend`, { event_id: ev.id });
    expect(r.status, r.text).toBe(200);
    expect(r.body).toMatchObject({ delivered: true, status: 200 });
    const got = rx.at('all').slice(seen);
    expect(got).toHaveLength(1);
    expect(got[0].headers['x-svc-recovery']).toBe('resend');
    expect(got[0].json).toEqual(ev);
    expect(got[0].headers['webhook-id']).toBe(ev.id);
    const w1 = await get(api, `${HOOKS}/${hook}`);
    expect(w1.delivery_status.attempts_total).toBe(w0.delivery_status.attempts_total + 1);
    const newest = (await get(api, `${HOOKS}/${hook}/attempts?limit=1`)).data[0];
    expect(newest).toMatchObject({ event_id: ev.id, recovery_id: 'resend', outcome: 'success' });

    rx.set('all', { status: 500 });
    const failed = await post(api, `${HOOKS}/${hook}/resend`, { event_id: ev.id }, 200);
    expect(failed).toMatchObject({ delivered: false, status: 500 });
    rx.set('all', { status: 200 });

    expect((await api.post(`${HOOKS}/${hook}/resend`, { event_id: 'nope' })).status).toBe(404);
    expect((await api.post(`${HOOKS}/${hook}/resend`, { event: ev.id })).status).toBe(400);
    expect((await otherApi.post(`${HOOKS}/${hook}/resend`, { event_id: ev.id })).status).toBe(404);
  });

  it('past the retention (on the engine clock) events and attempts are gone: 404, empty lists, pruned rows', async () => {
    const id = emitted[0].id;
    const old = new Set(emitted.map((e) => e.id));
    clock.advance(3_600_000 + 1); // (the runners' health checks on this clock emit new events meanwhile)
    expect((await api.get(`/v1/events/${id}`)).status).toBe(404);
    expect((await get(api, '/v1/events?limit=500')).data.filter((e: Json) => old.has(e.id))).toEqual([]);
    expect((await get(api, `${HOOKS}/${hook}/attempts?limit=500`)).data.filter((a: Json) => old.has(a.event_id))).toEqual([]);
    expect((await api.post(`${HOOKS}/${hook}/resend`, { event_id: id })).status).toBe(404);
    const db = openDb(svc.db);
    try {
      expect((db.prepare('SELECT COUNT(*) AS n FROM events WHERE created_ms <= ?').get(t0) as { n: number }).n).toBe(0);
      expect((db.prepare('SELECT COUNT(*) AS n FROM delivery_attempts WHERE kept_ms <= ?').get(t0) as { n: number }).n).toBe(0);
    } finally {
      db.close();
    }
  });
});

describe('--event-retention 0', () => {
  it('keeps no event and no attempt', async () => {
    const rx = await startReceiver();
    const svc = await startService({ eventRetentionMs: 0 });
    try {
      const org = svc.createOrg('none');
      const api = svc.api(org);
      await post(api, HOOKS, { webhook_url: rx.hook('a') });
      const app = await post(api, '/v1/apps', { name: 'shop' });
      await post(api, `/v1/apps/${app.app_id}/configs`, { components: [{ name: 'api' }] });
      const inst = await post(api, '/v1/installs', { app_id: app.app_id, name: 'x' });
      const wfs = await get(api, `/v1/installs/${inst.install_id}/workflows`);
      await waitWf(api, wfs[0].workflow_id);
      await svc.settled();
      expect(rx.at('a').length).toBeGreaterThan(0);
      expect((await get(api, '/v1/events')).data).toEqual([]);
      expect((await api.get(`/v1/events/${rx.at('a')[0].json.id}`)).status).toBe(404);
    } finally {
      await svc.stop();
      await rx.close();
    }
  });
});
