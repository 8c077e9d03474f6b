// NATS lost while svc runs (CONTRACT 6.6, issue 10 "Faults"): work started over the HTTP API keeps
// committing to the outbox; when NATS is back the relay publishes it, jobs go out, the workflow
// finishes, and every event reaches the webhook — nothing lost, nothing doubled.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findNatsServer, freePort, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.ts';
import { startReceiver, type Receiver } from '../helpers/receiver.ts';
import { startService, tmpDir, waitFor, type TestService } from '../helpers/service.ts';
import { emittedByAll, post } from '../helpers/workflows.ts';
import { ManualClock } from '../helpers/clock.ts';
import { JOB_RESEND_MS } from '../../src/engine/engine.ts';

describe.skipIf(findNatsServer() === null)('NATS lost while running', () => {
  let nats: NatsServerHandle;
  let svc: TestService;
  let rx: Receiver;
  let port: number;
  const storeDir = tmpDir('svc-nats-store-');
  const clock = new ManualClock(Date.now());

  beforeAll(async () => {
    port = await freePort();
    nats = await startNatsServer({ port, storeDir });
    rx = await startReceiver();
    // the engine's clock: a job sent while NATS was away goes out again after JOB_RESEND_MS of it
    svc = await startService({ natsUrl: nats.url }, { clock });
  });
  afterAll(async () => {
    await svc?.stop();
    await rx?.close();
    await nats?.stop();
  });

  it('an install created while NATS is down is committed, then provisioned and delivered once NATS is back', async () => {
    const org = svc.createOrg('outage');
    const api = svc.api(org);
    await post(api, '/v1/orgs/current/webhooks', { webhook_url: rx.hook('all') });
    const app = await post(api, '/v1/apps', { name: 'outage-app' });
    await post(api, `/v1/apps/${app.app_id}/configs`, { components: [{ name: 'api' }, { name: 'worker' }] });

    await nats.stop();
    // the API goes on: the install and its provision workflow commit, their first events wait in the outbox
    const install = await post(api, '/v1/installs', { app_id: app.app_id, name: 'during-outage' });
    const wfs = (await api.get(`/v1/installs/${install.install_id}/workflows`)).body;
    expect(wfs.map((w: { type: string }) => w.type)).toEqual(['provision']);
    expect(await svc.server.deliveryIdle()).toBe(false); // committed, not delivered
    expect(rx.at('all')).toHaveLength(0);

    nats = await startNatsServer({ port, storeDir });
    // a job published while NATS was away may be lost with the connection: the engine sends it
    // again once it is JOB_RESEND_MS old on its clock
    const wf = await waitFor(
      async () => {
        const w = (await api.get(`/v1/workflows/${wfs[0].workflow_id}`)).body;
        if (w.status === 'succeeded' || w.status === 'failed') return w;
        clock.advance(JOB_RESEND_MS / 4);
        return null;
      },
      30_000,
      'the provision workflow to end',
    );
    expect(wf.status).toBe('succeeded');
    await svc.settled(20_000);
    const emitted = await emittedByAll(api, org.org_id, { installs: [install.install_id] });
    expect(emitted.length).toBe(2 + 4 * 2); // the workflow and 4 steps, started and succeeded
    const got = rx.subjects('all');
    expect([...got].sort()).toEqual([...emitted].sort()); // each exactly once
    await waitFor(
      async () => (await api.get(`/v1/orgs/current/webhooks`)).body[0].delivery_status.attempts_total === emitted.length,
      5000,
      'the delivery status',
    );
  });
});
