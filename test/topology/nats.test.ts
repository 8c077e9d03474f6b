// NATS mode end to end (src/topology/nats.ts), the twin of embedded.test.ts over the same seam:
// with delivery on a worker thread (kept running by the thread supervisor) and on the engine's
// thread (--delivery-threads 0), every event an install's provision emits reaches a real receiver
// once, plain subscribers of svc.events.> see each once (CONTRACT 5.2), the outcomes come back to
// the delivery status, and deliveryIdle() says so only once the outbox and the stream are empty.
// With --no-deliver the events wait in JetStream: never idle, nothing delivered. The outbox
// relay's fault hook (how crash tests stop the process) is called at both of its points.
import { connect } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EVENTS_STREAM } from '../../src/bus/nats/jetstream.ts';
import { findNatsServer, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.ts';
import { startReceiver, type Receiver } from '../helpers/receiver.ts';
import { startService, type OrgCreds, type TestService } from '../helpers/service.ts';
import { get, post, waitWf } from '../helpers/workflows.ts';
import { queuedCount } from '../helpers/child-service.ts';
import { rid } from '../helpers/ids.ts';

/** A webhook at the receiver and an install: its provision's events, once its workflows are done. */
async function provision(svc: TestService, org: OrgCreds, rcv: Receiver, hook: string): Promise<string> {
  const api = svc.api(org);
  const wh = await post(api, '/v1/orgs/current/webhooks', { webhook_url: rcv.hook(hook) });
  const app = await post(api, '/v1/apps', { name: rid('app') });
  await post(api, `/v1/apps/${app.app_id}/configs`, {
    sandbox: { size: 'small' },
    components: [{ name: 'api', values: { image: 'api:1' } }],
  });
  const inst = await post(api, '/v1/installs', { app_id: app.app_id, name: rid('inst') });
  for (const w of await get(api, `/v1/installs/${inst.install_id}/workflows`)) await waitWf(api, w.workflow_id);
  return wh.webhook_id as string;
}

describe.skipIf(findNatsServer() === null)('NATS topology', () => {
  let nats: NatsServerHandle;
  let rcv: Receiver;
  beforeAll(async () => {
    nats = await startNatsServer();
    rcv = await startReceiver();
  });
  afterAll(async () => {
    await rcv?.close();
    await nats?.stop();
  });

  it.each([
    { name: 'on a delivery thread', deliveryThreads: 1 },
    { name: "on the engine's thread", deliveryThreads: 0 },
  ])(
    'delivers $name: each event once, mirrored once, outcomes reported in process (none on the bus), idle only when outbox and stream are empty',
    async ({ deliveryThreads }) => {
      const faults: string[] = [];
      const svc = await startService({ natsUrl: nats.url, deliveryThreads }, { relayFault: async (point) => void faults.push(point) });
      // svc serve's own data plane hands its outcome batches to the engine in process (a svc worker's go on svc.outcomes)
      const nc = await connect({ servers: nats.url });
      let onTheBus = 0;
      nc.subscribe('svc.outcomes.>', { callback: () => void onTheBus++ });
      await nc.flush();
      try {
        const org = svc.createOrg('nats-topology');
        const hook = rid('h');
        const webhookId = await provision(svc, org, rcv, hook);
        await svc.settled();
        expect(queuedCount(svc.db)).toBe(0);
        const ids = (await svc.events(org.org_id)).map((e) => e.id as string);
        expect(ids.length).toBeGreaterThan(5);
        expect(new Set(ids).size, 'each event once on svc.events.>').toBe(ids.length);
        const delivered = rcv.at(hook).map((r) => r.json.id as string);
        expect(new Set(delivered).size, 'each event delivered once').toBe(delivered.length);
        expect(new Set(delivered)).toEqual(new Set(ids));
        await expect
          .poll(async () => (await get(svc.api(org), `/v1/orgs/current/webhooks/${webhookId}`)).delivery_status.attempts_total, {
            timeout: 5000,
          })
          .toBe(delivered.length);
        expect(new Set(faults), 'the relay called its fault hook before and after publishing').toEqual(
          new Set(['before-publish', 'after-publish']),
        );
        await nc.flush();
        expect(onTheBus, 'outcome batches on svc.outcomes.>').toBe(0);
      } finally {
        await nc.close();
        await svc.stop();
      }
    },
  );

  it('with --no-deliver: the events wait in JetStream, nothing is delivered, and the server is never idle', async () => {
    const svc = await startService({ natsUrl: nats.url, deliver: false });
    const nc = await connect({ servers: nats.url });
    try {
      const org = svc.createOrg('nats-no-deliver');
      const hook = rid('h');
      await provision(svc, org, rcv, hook);
      const jsm = await jetstreamManager(nc);
      await expect.poll(async () => queuedCount(svc.db), { timeout: 5000 }).toBe(0);
      expect((await jsm.streams.info(EVENTS_STREAM)).state.messages, 'the batches wait in the stream').toBeGreaterThan(0);
      expect(await svc.server.deliveryIdle()).toBe(false);
      expect(rcv.at(hook)).toHaveLength(0);
      await jsm.streams.purge(EVENTS_STREAM); // leave the stream empty for the next test
    } finally {
      await nc.close();
      await svc.stop();
    }
  });
});
