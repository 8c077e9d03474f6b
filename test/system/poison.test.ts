// `svc serve --nats` with poison items in its store (CONTRACT 8), as a child process: a webhook
// whose registry entry is over NATS max_payload and an outbox row whose route header JetStream
// refuses, both planted in SQLite as data from before the limits. svc reaches `listening` at once,
// sets both aside (logged with their ids, never the webhook's secret), delivers the other org's
// events, and ends with exit 0 on SIGTERM — and again after a restart with the entry still stored.
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { openDb } from '../../store/db.ts';
import { createOrg } from '../../store/orgs.ts';
import { findNatsServer, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.ts';
import { startReceiver, type Receiver } from '../helpers/receiver.ts';
import { children, spawnService, type ChildService } from '../helpers/child-service.ts';
import { apiClient, tmpDir, waitFor, type OrgCreds } from '../helpers/service.ts';
import { post } from '../helpers/workflows.ts';
import { rid } from '../helpers/ids.ts';
import { deadLetters, plantEvent, plantWebhook, unpublishableCount } from '../helpers/poison.ts';
import { MAX_EVENT_BYTES } from '../../src/handoff/set-aside.ts';

type Json = any;

const SECRET = 'whsec_poison_secret_do_not_log';
const V1 = { sandbox: { size: 'small' }, components: [{ name: 'api', values: { image: 'api:1' } }] };

/** SIGTERM, then the exit (and how long it took). */
async function terminate(svc: ChildService): Promise<{ code: number | null; signal: NodeJS.Signals | null; ms: number }> {
  const t0 = Date.now();
  svc.proc.kill('SIGTERM');
  const exit = await svc.exited;
  return { ...exit, ms: Date.now() - t0 };
}

describe.skipIf(findNatsServer() === null)('svc serve with poison items stored', () => {
  let nats: NatsServerHandle;
  let rcv: Receiver;

  beforeAll(async () => {
    nats = await startNatsServer();
    rcv = await startReceiver();
  });
  afterEach(() => {
    for (const c of children) c.kill('SIGKILL');
  });
  afterAll(async () => {
    await rcv?.close();
    await nats?.stop();
  });

  it('listens at once, sets the poison aside, delivers the other org, and exits 0 on SIGTERM, also after a restart', async () => {
    const file = path.join(tmpDir('svc-poison-sys-'), 'svc.db');
    const db = openDb(file);
    const a = createOrg(db, 'org-a');
    const bRow = createOrg(db, 'org-b');
    const b: OrgCreds = { org_id: bRow.org.org_id, api_token: bRow.api_token };
    const poisonHook = plantWebhook(db, a.org.org_id, rcv.hook('sys-a-poison'), 40_000, SECRET);
    const poisonEvent = plantEvent(db, a.org.org_id, { padBytes: MAX_EVENT_BYTES + 1024 }); // over 256 KiB (CONTRACT 8)
    db.close();

    const args = ['--nats', nats.url, '--delivery-threads', '1', '--delivery-timeout', '2s'];
    const t0 = Date.now();
    const svc = await spawnService(file, args);
    expect(Date.now() - t0, 'reaches listening within seconds').toBeLessThan(10_000);

    const api = apiClient(svc.url, b);
    await post(api, '/v1/orgs/current/webhooks', { webhook_url: rcv.hook('sys-b') });
    const app = await post(api, '/v1/apps', { name: rid('app') });
    const cfg = await post(api, `/v1/apps/${app.app_id}/configs`, V1);
    await post(api, '/v1/installs', { app_id: app.app_id, name: rid('inst'), app_config_id: cfg.app_config_id });
    await waitFor(() => rcv.at('sys-b').length >= 2, 20_000, "org B's events delivered");
    expect(new Set(rcv.at('sys-b').map((r) => (r.json as Json).svcorgid))).toEqual(new Set([b.org_id]));

    await waitFor(() => deadLetters(file).length === 2, 10_000, 'both poison items set aside');
    expect(
      deadLetters(file)
        .map((d) => [d.kind, d.item_id])
        .sort(),
    ).toEqual([
      ['event', poisonEvent],
      ['registry', poisonHook],
    ]);
    expect(await unpublishableCount(svc.url)).toBe(2);
    expect(svc.output()).toContain(poisonHook); // logged with its id
    expect(svc.output()).toContain(poisonEvent);
    expect(svc.output()).not.toContain(SECRET);
    expect(rcv.at('sys-a-poison')).toEqual([]);

    const first = await terminate(svc);
    expect(first.code, svc.output()).toBe(0);
    expect(first.ms).toBeLessThan(10_000);

    // a restart with the entry still stored: listening again within seconds, nothing set aside twice
    const t1 = Date.now();
    const again = await spawnService(file, args);
    expect(Date.now() - t1).toBeLessThan(10_000);
    expect(await unpublishableCount(again.url)).toBe(0);
    expect(deadLetters(file)).toHaveLength(2);
    const second = await terminate(again);
    expect(second.code, again.output()).toBe(0);
    expect(second.ms).toBeLessThan(10_000);
  });
});
