// Embedded mode end to end (src/topology/embedded.ts), with delivery on its own thread (the
// default, as `npm start` runs) and on the engine's thread (--delivery-threads 0): every event an
// install's provision emits is delivered once to a real receiver, plain subscribers of
// svc.events.> on the in-process bus see each once (CONTRACT 5.2), the outcomes reach the delivery
// status, and deliveryIdle() says so only once the outbox is empty.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startReceiver, type Receiver } from '../helpers/receiver.ts';
import { startService } from '../helpers/service.ts';
import { get, post, waitWf } from '../helpers/workflows.ts';
import { queuedCount } from '../helpers/child-service.ts';
import { rid } from '../helpers/ids.ts';

describe.each([
  { name: 'on its own thread', deliveryThreads: null },
  { name: "on the engine's thread", deliveryThreads: 0 },
])('embedded delivery $name', ({ deliveryThreads }) => {
  let rcv: Receiver;
  beforeAll(async () => {
    rcv = await startReceiver();
  });
  afterAll(async () => {
    await rcv.close();
  });

  it('delivers each event once, mirrors each once, reports outcomes, and is idle only when the outbox is empty', async () => {
    const svc = await startService({ deliveryThreads });
    try {
      const org = svc.createOrg('embedded');
      const api = svc.api(org);
      const hook = rid('h');
      const wh = await post(api, '/v1/orgs/current/webhooks', { webhook_url: rcv.hook(hook) });
      const app = await post(api, '/v1/apps', { name: rid('app') });
      await post(api, `/v1/apps/${app.app_id}/configs`, {
        sandbox: { size: 'small' },
        components: [{ name: 'api', values: { image: 'api:1' } }],
      });
      const inst = await post(api, '/v1/installs', { app_id: app.app_id, name: rid('inst') });
      for (const w of await get(api, `/v1/installs/${inst.install_id}/workflows`)) await waitWf(api, w.workflow_id);
      await svc.settled();
      expect(queuedCount(svc.db)).toBe(0);
      const seen = await svc.events(org.org_id);
      const ids = seen.map((e) => e.id as string);
      expect(ids.length).toBeGreaterThan(5);
      expect(new Set(ids).size, 'each event once on svc.events.>').toBe(ids.length);
      const delivered = rcv.at(hook).map((r) => r.json.id as string);
      expect(new Set(delivered).size, 'each event delivered once').toBe(delivered.length);
      expect(new Set(delivered)).toEqual(new Set(ids));
      // the outcome batches came back to the engine's thread (CONTRACT 4.1 delivery status)
      await expect
        .poll(async () => (await get(api, `/v1/orgs/current/webhooks/${wh.webhook_id}`)).delivery_status.attempts_total, { timeout: 5000 })
        .toBe(delivered.length);
    } finally {
      await svc.stop();
    }
  });
});
