// The delivery watchdog end to end (CONTRACT 4.1 "Delivery watchdog", 6.2, 6.5; issue 30 "Done
// when"): real receivers answering 500, facts committed by a producer, in embedded mode (the SQLite
// outbox is the queue) and in NATS mode (JetStream SVC_EVENTS, KV registry).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startNatsServer, findNatsServer, type NatsServerHandle } from '../helpers/nats-server.ts';
import { startReceiver, type Receiver } from '../helpers/receiver.ts';
import { startService, waitFor, type ApiClient, type OrgCreds, type TestService } from '../helpers/service.ts';
import { factProducer, type FactProducer } from '../helpers/tenancy.ts';
import { metric } from '../helpers/ledger.ts';
import { post } from '../helpers/workflows.ts';

type Json = any;

const HOOKS = '/v1/orgs/current/webhooks';
const DELIVERY = 'com.svc.webhook.delivery.v1';
const modes = findNatsServer() ? (['embedded', 'nats'] as const) : (['embedded'] as const);

describe.each(modes)('delivery watchdog (%s mode)', (mode) => {
  let nats: NatsServerHandle | null = null;
  let svc: TestService;
  let rx: Receiver;
  let org: OrgCreds;
  let api: ApiClient;
  let producer: FactProducer;
  const ids: Record<string, string> = {};

  /** Commit n facts (one event each), one after the other; their workflow ids. */
  async function facts(n: number): Promise<string[]> {
    const out: string[] = [];
    for (let i = 0; i < n; i++) out.push(await producer.fact(org.org_id));
    return out;
  }

  /** The watchdog events a receiver's hook got, as `<transition>:<webhook id>`. */
  const watchdogAt = (hook: string): Json[] =>
    rx
      .at(hook)
      .filter((r) => r.json?.type === DELIVERY)
      .map((r) => r.json);
  const about = (hook: string, webhookId: string, transition?: string): Json[] =>
    watchdogAt(hook).filter((e) => e.data.webhook.id === webhookId && (transition === undefined || e.data.transition === transition));
  const status = async (id: string): Promise<Json> => (await api.get(`${HOOKS}/${id}`)).body.delivery_status;

  beforeAll(async () => {
    if (mode === 'nats') nats = await startNatsServer();
    rx = await startReceiver();
    svc = await startService({ eventRetentionMs: 3_600_000, ...(nats ? { natsUrl: nats.url } : {}) });
    org = svc.createOrg('watchdog');
    api = svc.api(org);
    producer = await factProducer({ natsUrl: nats?.url ?? null, bus: svc.server.bus });
    rx.set('bad', { status: 500 });
    ids.bad = (await post(api, HOOKS, { webhook_url: `${rx.hook('bad')}?token=s3cret-query`, secret: 'whsec-never-shown' })).webhook_id;
    ids.watcher = (
      await post(api, HOOKS, {
        webhook_url: rx.hook('watcher'),
        interests: { resources: { webhooks: { delivery_failing: true, delivery_recovered: true, delivery_disabled: true } } },
      })
    ).webhook_id;
    ids.failingOnly = (
      await post(api, HOOKS, { webhook_url: rx.hook('failing-only'), interests: { resources: { webhooks: { delivery_failing: true } } } })
    ).webhook_id;
    ids.scoped = (await post(api, HOOKS, { webhook_url: rx.hook('scoped'), match: { installs: {} } })).webhook_id;
    ids.chosenAll = (await post(api, HOOKS, { webhook_url: rx.hook('chosen-all'), interests: { all_events: true } })).webhook_id;
    ids.noInterests = (await post(api, HOOKS, { webhook_url: rx.hook('no-interests') })).webhook_id;
  });
  afterAll(async () => {
    await producer?.close();
    await svc?.stop();
    await rx?.close();
    await nats?.stop();
  });

  it('receiver answering 500: one `failing` at 5 to an org-wide watcher (data as pinned, no URL path, query or secret), none to the failing webhook; another at 20; `recovered` on the first success', async () => {
    const first = await facts(5);
    await waitFor(() => about('watcher', ids.bad, 'failing').length === 1, 10_000, 'failing at 5');
    await svc.settled();
    const [failing] = about('watcher', ids.bad);
    expect(failing.subject).toBe(`${org.org_id}/webhook_delivery/${ids.bad}/failing`);
    expect(failing.interests).toEqual(['resource:webhooks', 'op:webhooks.delivery', 'event:webhook.failing']);
    const host = new URL(rx.url).host;
    expect(failing.data.webhook).toEqual({ id: ids.bad, url_host: host });
    expect(failing.data.delivery).toMatchObject({ consecutive_failures: 5, last_status_code: 500 });
    expect(Date.parse(failing.data.delivery.failing_since)).toBeGreaterThan(0);
    const text = JSON.stringify(failing);
    for (const secret of ['/h/bad', 's3cret-query', 'whsec-never-shown']) expect(text).not.toContain(secret);
    expect(rx.at('failing-only').filter((r) => r.json?.type === DELIVERY).length).toBe(1);
    expect(about('bad', ids.bad)).toEqual([]);
    expect(watchdogAt('scoped')).toEqual([]); // no install, component or action: org-wide webhooks only
    // all_events chosen: it gets them; no interests given (read as all_events): it keeps getting
    // only what it got before the watchdog existed (the acceptance suite's delivery tests count that)
    expect(about('chosen-all', ids.bad, 'failing')).toHaveLength(1);
    expect(watchdogAt('no-interests')).toEqual([]);
    expect(rx.at('no-interests').length).toBeGreaterThanOrEqual(5);
    let s = await status(ids.bad);
    expect(s).toMatchObject({ state: 'failing', consecutive_failures: 5, disabled_at: null, disabled_reason: null });
    expect(s.failing_since).toBe(failing.data.delivery.failing_since);
    // the kept event of the first failed fact: where a recovery should start
    const kept = (await api.get(`/v1/events?type=com.svc.workflow.lifecycle.v1&limit=500`)).body.data as Json[];
    const firstTime = kept.find((e) => e.data.workflow.id === first[0]).time;
    expect(s.recover_since).toBe(firstTime);

    await facts(15);
    await waitFor(() => about('watcher', ids.bad, 'failing').length === 2, 10_000, 'failing at 20');
    await svc.settled();
    expect(about('watcher', ids.bad, 'failing').map((e) => e.data.delivery.consecutive_failures)).toEqual([5, 20]);

    rx.set('bad', { status: 200 });
    await facts(1);
    await waitFor(() => about('watcher', ids.bad, 'recovered').length === 1, 10_000, 'recovered');
    const recovered = about('watcher', ids.bad, 'recovered')[0];
    expect(recovered.subject).toBe(`${org.org_id}/webhook_delivery/${ids.bad}/recovered`);
    expect(recovered.data.delivery).toMatchObject({
      consecutive_failures: 20,
      failed_events: 20,
      recover_since: firstTime,
      last_status_code: 500,
    });
    expect(rx.at('failing-only').filter((r) => r.json?.type === DELIVERY).length).toBe(2); // not the recovered one
    s = await status(ids.bad);
    expect(s).toMatchObject({ state: 'active', consecutive_failures: 0, failing_since: null, recover_since: null });
    await svc.settled();
    expect(about('bad', ids.bad)).toEqual([]);
    expect(watchdogAt('scoped')).toEqual([]);
    // kept in the history like any event
    const history = (await api.get(`/v1/events?type=${DELIVERY}`)).body.data as Json[];
    expect(history.map((e) => e.data.transition)).toEqual(['failing', 'failing', 'recovered']);
  });

  it('disable_after {failures: 10, duration: "0s"}: one `disabled` after 10 failures; the next 20 events make no attempt, are counted dropped and kept', async () => {
    rx.set('flaky', { status: 500 });
    const created = await api.post(HOOKS, { webhook_url: rx.hook('flaky'), disable_after: { failures: 10, duration: '0s' } });
    expect(created.status, created.text).toBe(201);
    expect(created.body.disable_after).toEqual({ failures: 10, duration: '0s' });
    expect(created.body.delivery_status.state).toBe('active');
    ids.flaky = created.body.webhook_id;
    await facts(10);
    await waitFor(() => about('watcher', ids.flaky, 'disabled').length === 1, 10_000, 'disabled');
    await svc.settled();
    const disabled = about('watcher', ids.flaky, 'disabled')[0];
    const s = await status(ids.flaky);
    expect(s.state).toBe('disabled');
    expect(s.disabled_reason).toBe(`auto: 10 consecutive failures since ${s.failing_since}`);
    expect(disabled.data.delivery).toMatchObject({ consecutive_failures: 10, disabled_reason: s.disabled_reason });
    expect(about('watcher', ids.flaky).map((e) => e.data.transition)).toEqual(['failing', 'disabled']);
    expect(rx.at('flaky').length).toBe(10);

    const droppedBefore = await metric(svc.url, 'svc_events_dropped_total', { reason: 'webhook_disabled' });
    const missed = await facts(20);
    await svc.settled();
    await waitFor(
      async () => (await metric(svc.url, 'svc_events_dropped_total', { reason: 'webhook_disabled' })) - droppedBefore >= 20,
      5000,
      'the drops counted',
    );
    expect(rx.at('flaky').length).toBe(10);
    expect((await metric(svc.url, 'svc_events_dropped_total', { reason: 'webhook_disabled' })) - droppedBefore).toBe(20);
    const kept = (await api.get(`/v1/events?type=com.svc.workflow.lifecycle.v1&limit=500`)).body.data as Json[];
    const keptIds = new Set(kept.map((e) => e.data.workflow.id));
    for (const id of missed) expect(keptIds.has(id)).toBe(true);
    // the other webhooks got them
    expect(new Set(rx.at('bad').map((r) => r.json?.data?.workflow?.id)).has(missed[19])).toBe(true);
  });

  it('enable while the receiver still fails: 409 with the ping error, still disabled; once it answers, enable {recover} catches up every missed event exactly once, then `enabled`', async () => {
    const refused = await api.post(`${HOOKS}/${ids.flaky}/enable`, { recover: true });
    expect(refused.status, refused.text).toBe(409);
    expect(refused.body.error).toBe('conflict');
    expect(refused.body.message).toContain('HTTP 500');
    expect((await status(ids.flaky)).state).toBe('disabled');
    expect(about('watcher', ids.flaky, 'enabled')).toEqual([]);

    rx.set('flaky', { status: 200 });
    const before = rx.at('flaky').length;
    const r = await api.post(`${HOOKS}/${ids.flaky}/enable`, { recover: true });
    expect(r.status, r.text).toBe(200);
    expect(r.body.webhook.delivery_status).toMatchObject({ state: 'active', disabled_at: null, disabled_reason: null });
    expect(typeof r.body.recovery_id).toBe('string');
    await waitFor(
      async () => (await api.get(`${HOOKS}/${ids.flaky}/recoveries/${r.body.recovery_id}`)).body.state === 'done',
      15_000,
      'the recovery',
    );
    await svc.settled();
    await waitFor(() => about('watcher', ids.flaky, 'enabled').length === 1, 5000, 'enabled');
    const arrived = rx.at('flaky').slice(before);
    const recovered = arrived.filter((a) => a.headers['x-svc-recovery'] === r.body.recovery_id);
    const pings = arrived.filter((a) => a.json?.type === 'com.svc.webhook.ping.v1');
    expect(pings.length).toBe(1);
    // the 10 that failed and the 20 missed while disabled, each once
    const lifecycle = recovered.filter((a) => a.json?.type === 'com.svc.workflow.lifecycle.v1').map((a) => a.json.id);
    expect(lifecycle.length).toBe(30);
    expect(new Set(lifecycle).size).toBe(30);
    // never an event about itself, not even in a recovery
    expect(arrived.filter((a) => a.json?.type === DELIVERY && a.json.data.webhook.id === ids.flaky)).toEqual([]);
    expect(about('watcher', ids.flaky).map((e) => e.data.transition)).toEqual(['failing', 'disabled', 'enabled']);
  });

  it('POST …/disable {note} then a fact: no attempt, reason as given; the manual disable emits disabled', async () => {
    const r = await api.post(`${HOOKS}/${ids.flaky}/disable`, { note: 'receiver migration' });
    expect(r.status, r.text).toBe(200);
    expect(r.body.delivery_status).toMatchObject({ state: 'disabled', disabled_reason: 'receiver migration' });
    await waitFor(() => about('watcher', ids.flaky, 'disabled').length === 2, 5000, 'the manual disabled');
    const n = rx.at('flaky').length;
    const started = Date.now();
    await facts(3);
    await svc.settled();
    expect(rx.at('flaky').length).toBe(n);
    expect(Date.now() - started).toBeLessThan(10_000);
    const again = await api.post(`${HOOKS}/${ids.flaky}/enable`, {});
    expect(again.status, again.text).toBe(200);
    expect(again.body.recovery_id).toBeUndefined();
  });

  it('validation: disable_after out of range, an unknown op of webhooks → 400 changing nothing; PATCH sets and removes disable_after', async () => {
    const bad: unknown[] = [
      { failures: 9, duration: '0s' },
      { failures: 100_001, duration: '0s' },
      { failures: 10, duration: '31d' },
      { failures: 10 },
      { duration: '1h' },
      { failures: 10, duration: 'soon' },
      { failures: 10.5, duration: '1h' },
    ];
    for (const disable_after of bad) {
      const r = await api.post(HOOKS, { webhook_url: rx.hook('never'), disable_after });
      expect(r.status, JSON.stringify(disable_after)).toBe(400);
      expect(r.body.error).toBe('invalid_request');
      expect(r.body.details[0].path).toMatch(/^disable_after/);
    }
    const op = await api.post(HOOKS, { webhook_url: rx.hook('never'), interests: { resources: { webhooks: { ops: ['deliveries'] } } } });
    expect(op.status).toBe(400);
    expect(op.body.details[0].path).toBe('interests.resources.webhooks.ops.0');
    expect((await api.get(HOOKS)).body.filter((w: Json) => w.webhook_url === rx.hook('never'))).toEqual([]);
    const p = await api.patch(`${HOOKS}/${ids.bad}`, { disable_after: { failures: 100, duration: '30d' } });
    expect(p.status, p.text).toBe(200);
    expect(p.body.disable_after).toEqual({ failures: 100, duration: '30d' });
    expect(p.body.interests).toEqual({ all_events: true });
    expect((await api.patch(`${HOOKS}/${ids.bad}`, { disable_after: { failures: 5, duration: '0s' } })).status).toBe(400);
    expect((await api.patch(`${HOOKS}/${ids.bad}`, { disable_after: null })).body.disable_after).toBeNull();
    expect((await api.post(`${HOOKS}/${ids.bad}/disable`, { note: 5 })).status).toBe(400);
    expect((await api.post(`${HOOKS}/${ids.bad}/enable`, { recover: 'yes' })).status).toBe(400);
    expect((await api.post(`${HOOKS}/wh_nope/disable`, {})).status).toBe(404);
    expect((await status(ids.bad)).state).toBe('active');
  });

  it('enable {recover} while a recovery of the webhook runs: 409 naming it, before any ping; still disabled', async () => {
    rx.set('bad', { hang: true });
    const running = await api.post(`${HOOKS}/${ids.bad}/recover`, { since: '1h', only_failed: false });
    expect(running.status, running.text).toBe(202);
    expect((await api.post(`${HOOKS}/${ids.bad}/disable`, {})).status).toBe(200);
    const pings = rx.at('bad').filter((r) => r.json?.type === 'com.svc.webhook.ping.v1').length;
    const r = await api.post(`${HOOKS}/${ids.bad}/enable`, { recover: true });
    expect(r.status, r.text).toBe(409);
    expect(r.body).toMatchObject({ error: 'conflict' });
    expect(r.body.message).toContain(running.body.recovery_id);
    expect(rx.at('bad').filter((x) => x.json?.type === 'com.svc.webhook.ping.v1').length).toBe(pings);
    expect((await status(ids.bad)).state).toBe('disabled');
    rx.set('bad', { status: 200 });
  });
});
