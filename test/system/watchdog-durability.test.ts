// The delivery watchdog's state is durable and honoured by every data plane (CONTRACT 4.1; issue 30
// "Done when"): a webhook disabled by `disable_after` stays disabled across a kill -9 of svc serve,
// in embedded mode and in NATS mode (where a separate `svc worker` delivers and is never restarted);
// the events emitted afterwards make no attempt at it and are kept; a webhook disabled by hand gets
// nothing of what is emitted within the next second.
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { startNatsServer, findNatsServer, type NatsServerHandle } from '../helpers/nats-server.ts';
import { startReceiver, type Receiver } from '../helpers/receiver.ts';
import { childSettled, children, dataplaneKey, spawnService, spawnWorker, type ChildService } from '../helpers/child-service.ts';
import { apiClient, newDbWithOrg, waitFor, type ApiClient } from '../helpers/service.ts';
import { get, post, waitWf } from '../helpers/workflows.ts';

type Json = any;

const HOOKS = '/v1/orgs/current/webhooks';
const modes = findNatsServer() ? (['embedded', 'nats'] as const) : (['embedded'] as const);

describe.each(modes)('delivery watchdog across kill -9 (%s mode)', (mode) => {
  let nats: NatsServerHandle | null = null;
  let nc: NatsConnection | null = null;
  let rx: Receiver;

  afterEach(() => {
    for (const c of children) c.kill('SIGKILL');
  });
  afterAll(async () => {
    await nc?.close();
    await rx?.close();
    await nats?.stop();
  });

  it('disabled by disable_after: still disabled after kill -9, the next events make no attempt at it and are kept; a manual ' +
    'disable holds within 1 s', async () => {
    if (mode === 'nats') {
      nats = await startNatsServer();
      nc = await connect({ servers: nats.url });
    }
    rx = await startReceiver();
    const { db, org } = newDbWithOrg('watchdog-kill');
    const args = nats ? ['--nats', nats.url, '--no-deliver'] : [];
    let svc: ChildService = await spawnService(db, args);
    if (nats) await spawnWorker(nats.url, [], { SVC_DATAPLANE_KEY: dataplaneKey(db) });
    const jsm = nc ? await jetstreamManager(nc) : undefined;
    let api: ApiClient = apiClient(svc.url, org);

    rx.set('flaky', { status: 500 });
    const flaky = (await post(api, HOOKS, { webhook_url: rx.hook('flaky'), disable_after: { failures: 10, duration: '0s' } })).webhook_id;
    const live = (await post(api, HOOKS, { webhook_url: rx.hook('live') })).webhook_id;
    await post(api, HOOKS, { webhook_url: rx.hook('watcher'), interests: { resources: { webhooks: { delivery_disabled: true } } } });
    // pings count as attempts (CONTRACT 4.1): ten failed ones disable it
    for (let i = 0; i < 10; i++) expect((await post(api, `${HOOKS}/${flaky}/ping`, undefined, 200)).delivered).toBe(false);
    const before = (await get(api, `${HOOKS}/${flaky}`)).delivery_status;
    expect(before).toMatchObject({ state: 'disabled', consecutive_failures: 10 });
    expect(before.disabled_reason).toBe(`auto: 10 consecutive failures since ${before.failing_since}`);
    await waitFor(() => rx.at('watcher').length === 1, 10_000, 'the disabled event');
    expect(rx.at('watcher')[0].json.data).toMatchObject({ transition: 'disabled', webhook: { id: flaky } });

    svc.proc.kill('SIGKILL');
    await svc.exited;
    svc = await spawnService(db, args);
    api = apiClient(svc.url, org);
    const after = (await get(api, `${HOOKS}/${flaky}`)).delivery_status;
    expect(after).toMatchObject({
      state: 'disabled',
      disabled_at: before.disabled_at,
      disabled_reason: before.disabled_reason,
      failing_since: before.failing_since,
    });

    // events after the restart: the install's provisioning (run by the local runner)
    const app = await post(api, '/v1/apps', { name: 'shop' });
    await post(api, `/v1/apps/${app.app_id}/configs`, { components: [{ name: 'api' }] });
    const inst = await post(api, '/v1/installs', { app_id: app.app_id, name: 'eu-1' });
    const [wf] = await get(api, `/v1/installs/${inst.install_id}/workflows`);
    expect((await waitWf(api, wf.workflow_id)).status).toBe('succeeded');
    await childSettled(db, { jsm, timeoutMs: 30_000 });
    const kept = (await get(api, '/v1/events?limit=500')).data.filter((e: Json) => e.data?.workflow?.id === wf.workflow_id);
    expect(kept.length).toBeGreaterThan(3);
    await waitFor(() => rx.at('live').length >= kept.length, 10_000, 'the live webhook to get them');
    expect(rx.at('flaky').length).toBe(10); // the pings, nothing since
    expect((await get(api, `${HOOKS}/${flaky}`)).delivery_status.state).toBe('disabled');

    // a manual disable: what is emitted within the next second reaches every data plane as disabled
    expect((await post(api, `${HOOKS}/${live}/disable`, {}, 200)).delivery_status.state).toBe('disabled');
    const atLive = rx.at('live').length;
    const started = Date.now();
    // its provisioning starts at once: its first events are emitted within a second of the disable
    const inst2 = await post(api, '/v1/installs', { app_id: app.app_id, name: 'eu-2' });
    expect(Date.now() - started).toBeLessThan(1000);
    const [wf2] = await get(api, `/v1/installs/${inst2.install_id}/workflows`);
    expect((await waitWf(api, wf2.workflow_id)).status).toBe('succeeded');
    await childSettled(db, { jsm, timeoutMs: 30_000 });
    expect(rx.at('live').length).toBe(atLive);
  }, 120_000);
});
