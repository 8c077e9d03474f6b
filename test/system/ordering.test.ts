// Ordering (CONTRACT 10.1): every event carries `svcorderkey` and `sequence`, contiguous per org and
// key from 1 in commit order. A differential run in both modes (the in-process bus with the
// embedded outbox, and a real nats-server): random workflows of several installs, the committed
// events (in commit order, as svc.events.> carried them) against a model that derives each event's
// key from its data alone and counts per key; every delivered event against the committed one; and
// across a restart on the same database, each key goes on from where it was.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findNatsServer, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.ts';
import { startReceiver, type Receiver } from '../helpers/receiver.ts';
import { startService, waitFor, type ApiClient, type OrgCreds, type TestService } from '../helpers/service.ts';
import { post, waitWf } from '../helpers/workflows.ts';
import { rid } from '../helpers/ids.ts';

type Json = any;

const haveNats = findNatsServer() !== null;

/** The key an event must carry, from its data alone (the model of CONTRACT 10.1). */
function modelKey(e: Json): string {
  const d = e.data;
  if (d.kind === 'webhook_delivery') return d.webhook.id;
  if (d.kind === 'runner_unhealthy' || d.kind === 'runner_inactive') return d.runner.id;
  if (d.kind === 'component_health' || d.kind === 'install_health') return d.install_id;
  if (d.workflow) return d.workflow.owner_type === 'installs' ? d.workflow.owner_id : (d.install_id ?? d.links?.install ?? d.workflow.id);
  throw new Error(`no model key for ${d.kind}`);
}

/** A seeded random source (mulberry32): a failing run can be replayed from its seed. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * Commit order against the model: each event's key is the model's, its sequence the count of its
 * key's events so far (so contiguous from `from[key] + 1`), 20 digits; no event twice. Returns the
 * last sequence of each key.
 */
function expectContiguous(committed: Json[], from: Map<string, number> = new Map()): Map<string, number> {
  const last = new Map(from);
  const ids = new Set<string>();
  for (const e of committed) {
    expect(ids.has(e.id), `event ${e.id} committed once`).toBe(false);
    ids.add(e.id);
    const key = modelKey(e);
    expect(e.svcorderkey, `${e.subject}: its key`).toBe(key);
    const n = (last.get(key) ?? 0) + 1;
    last.set(key, n);
    expect(e.sequence, `${e.subject}: its sequence`).toBe(String(n).padStart(20, '0'));
  }
  return last;
}

/** Every delivery is a committed event, byte for byte in key and sequence, and each arrived once. */
function expectDeliveredAsCommitted(delivered: Json[], committed: Json[]): void {
  const byId = new Map(committed.map((e) => [e.id, e]));
  const seen = new Set<string>();
  for (const e of delivered) {
    const c = byId.get(e.id);
    expect(c, `delivered ${e.subject} was committed`).toBeDefined();
    expect([e.svcorderkey, e.sequence]).toEqual([c.svcorderkey, c.sequence]);
    const pair = `${e.svcorderkey}#${e.sequence}`;
    expect(seen.has(pair), `${pair} delivered once`).toBe(false);
    seen.add(pair);
  }
  expect(seen.size).toBe(committed.length);
}

describe.each(['memory', 'nats'] as const)('ordering keys and sequences on the %s bus', (mode) => {
  const skip = mode === 'nats' && !haveNats;
  let nats: NatsServerHandle | null = null;
  let svc: TestService;
  let rx: Receiver;
  let org: OrgCreds;
  let api: ApiClient;
  const installs: Array<{ id: string; components: string[] }> = [];

  beforeAll(async () => {
    if (skip) return;
    if (mode === 'nats') nats = await startNatsServer();
    svc = await startService({ natsUrl: nats?.url ?? null });
    expect(svc.server.bus.kind).toBe(mode);
    rx = await startReceiver();
    org = svc.createOrg(rid('org'));
    api = svc.api(org);
  });

  afterAll(async () => {
    if (skip) return;
    await svc?.stop();
    await rx?.close();
    await nats?.stop();
  });

  /** Wait until the receiver has every committed event and svc has nothing left to deliver. */
  async function deliveredAll(): Promise<{ committed: Json[]; delivered: Json[] }> {
    const committed = await svc.events(org.org_id);
    await waitFor(() => rx.at('all').length >= committed.length, 20_000, `${committed.length} deliveries`);
    await svc.settled();
    return { committed, delivered: rx.at('all').map((r) => r.json) };
  }

  it.skipIf(skip)('random workflows of several installs: per key contiguous from 1 in commit order, each delivered once', async () => {
    await post(api, '/v1/orgs/current/webhooks', { webhook_url: rx.hook('all') });
    const app = await post(api, '/v1/apps', { name: rid('app') });
    await post(api, `/v1/apps/${app.app_id}/configs`, { components: [{ name: 'api' }, { name: 'worker' }] });
    const seed = Date.now() % 100_000;
    const rnd = random(seed);
    const started: string[] = [];
    for (let i = 0; i < 4; i++) {
      const ins = await post(api, '/v1/installs', { app_id: app.app_id, name: rid('ins') });
      const wfs = (await api.get(`/v1/installs/${ins.install_id}/workflows`)).body;
      started.push(...wfs.map((w: Json) => w.workflow_id));
      installs.push({ id: ins.install_id, components: [] });
    }
    for (const w of started) await waitWf(api, w);
    for (const i of installs) i.components = (await api.get(`/v1/installs/${i.id}`)).body.components.map((c: Json) => c.component_id);
    // random workflows, several at once across installs (their events interleave in commit order)
    const runs: Array<Promise<Json>> = [];
    for (let n = 0; n < 12; n++) {
      const ins = installs[Math.floor(rnd() * installs.length)];
      const op = Math.floor(rnd() * 3);
      const path =
        op === 0
          ? `/v1/installs/${ins.id}/reprovision`
          : op === 1
            ? `/v1/installs/${ins.id}/components/${ins.components[Math.floor(rnd() * ins.components.length)]}/deploy`
            : `/v1/installs/${ins.id}/secrets/sync`;
      runs.push(post(api, path).then((w) => waitWf(api, w.workflow_id)));
    }
    await Promise.all(runs);
    const { committed, delivered } = await deliveredAll();
    const last = expectContiguous(committed);
    // every install is a key of its own; its workflows' events are in it
    for (const i of installs) expect(last.get(i.id), `install ${i.id} (seed ${seed})`).toBeGreaterThan(4);
    expectDeliveredAsCommitted(delivered, committed);
    // the kept history has the same key and sequence in its bodies
    const kept = (await api.get('/v1/events?limit=500')).body.data as Json[];
    const keptIds = new Map(kept.map((e) => [e.id, e]));
    for (const e of committed) expect(keptIds.get(e.id)?.sequence).toBe(e.sequence);
  });

  it.skipIf(skip)('a ping carries neither a key nor a sequence', async () => {
    const hook = await post(api, '/v1/orgs/current/webhooks', {
      webhook_url: rx.hook('ping'),
      interests: { resources: { installs: { outcome: 'none' } } },
    });
    const r = await api.post(`/v1/orgs/current/webhooks/${hook.webhook_id}/ping`);
    expect(r.status, r.text).toBe(200);
    const ping = rx.at('ping').find((x) => x.json?.type === 'com.svc.webhook.ping.v1')?.json;
    expect(ping).toBeDefined();
    expect('svcorderkey' in ping).toBe(false);
    expect('sequence' in ping).toBe(false);
  });

  it.skipIf(skip)('after a restart on the same database each key goes on from its last sequence', async () => {
    const before = expectContiguous(await svc.events(org.org_id));
    await svc.stop();
    svc = await startService({ natsUrl: nats?.url ?? null, db: svc.db });
    api = svc.api(org);
    const ins = installs[0];
    const w = await post(api, `/v1/installs/${ins.id}/reprovision`);
    await waitWf(api, w.workflow_id);
    const after = await svc.events(org.org_id);
    expect(after.length).toBeGreaterThan(0);
    const last = expectContiguous(after, before);
    expect(last.get(ins.id)).toBeGreaterThan(before.get(ins.id)!);
    expect(after[0].sequence).toBe(String(before.get(after[0].svcorderkey)! + 1).padStart(20, '0'));
  });
});

describe.each(['memory', 'nats'] as const)('gaps of a key on the %s bus: listed and recovered by sequence', (mode) => {
  const skip = mode === 'nats' && !haveNats;
  let nats: NatsServerHandle | null = null;
  let svc: TestService;
  let rx: Receiver;
  let api: ApiClient;

  beforeAll(async () => {
    if (skip) return;
    if (mode === 'nats') nats = await startNatsServer();
    svc = await startService({ natsUrl: nats?.url ?? null });
    rx = await startReceiver();
    api = svc.api(svc.createOrg(rid('org')));
  });

  afterAll(async () => {
    if (skip) return;
    await svc?.stop();
    await rx?.close();
    await nats?.stop();
  });

  it.skipIf(skip)('a receiver that missed 5-7 of a key gets exactly those three again by after_sequence 4, until_sequence 7', async () => {
    const hook = await post(api, '/v1/orgs/current/webhooks', { webhook_url: rx.hook('gap') });
    const app = await post(api, '/v1/apps', { name: rid('app') });
    await post(api, `/v1/apps/${app.app_id}/configs`, { components: [{ name: 'api' }, { name: 'worker' }] });
    const ins = await post(api, '/v1/installs', { app_id: app.app_id, name: rid('ins') });
    const key: string = ins.install_id;
    const seqOf = (j: Json) => Number(j?.sequence);
    rx.set('gap', { answer: (r) => ({ status: r.json?.svcorderkey === key && seqOf(r.json) >= 5 && seqOf(r.json) <= 7 ? 500 : 200 }) });
    for (const w of (await api.get(`/v1/installs/${key}/workflows`)).body) await waitWf(api, w.workflow_id);
    await svc.settled();
    const first = rx.at('gap').filter((r) => r.json.svcorderkey === key);
    expect(first.length).toBeGreaterThan(8);

    // the key's events, in sequence order, from the history: a page of 3 after 1, then the rest by cursor
    const page = (await api.get(`/v1/events?order_key=${key}&after_sequence=1&limit=3`)).body;
    expect(page.data.map(seqOf)).toEqual([2, 3, 4]);
    const rest = (await api.get(`/v1/events?order_key=${key}&after_sequence=1&limit=500&after=${page.next_cursor}`)).body;
    expect(rest.data.map(seqOf)).toEqual(Array.from({ length: first.length - 4 }, (_, i) => i + 5));
    expect((await api.get(`/v1/events?order_key=nope`)).body.data).toEqual([]);
    expect((await api.get(`/v1/events?after_sequence=3`)).status).toBe(400);

    // bad windows are 400 and start nothing
    const recover = (body: Json) => api.post(`/v1/orgs/current/webhooks/${hook.webhook_id}/recover`, body);
    for (const bad of [
      { order_key: key },
      { order_key: key, after_sequence: 4, since: '1h' },
      { order_key: key, after_sequence: 7, until_sequence: 4 },
      { after_sequence: 4 },
    ]) {
      const r = await recover(bad);
      expect(r.status, JSON.stringify(bad)).toBe(400);
      expect(r.body.error).toBe('invalid_request');
    }

    rx.set('gap', {});
    const before = rx.at('gap').length;
    const r = await recover({ order_key: key, after_sequence: 4, until_sequence: 7 });
    expect(r.status, r.text).toBe(202);
    await waitFor(
      async () => (await api.get(`/v1/orgs/current/webhooks/${hook.webhook_id}/recoveries/${r.body.recovery_id}`)).body.state === 'done',
      10_000,
      'the recovery to end',
    );
    await svc.settled();
    const again = rx.at('gap').slice(before);
    expect(again.map((x) => [x.json.svcorderkey, seqOf(x.json)]).sort()).toEqual([
      [key, 5],
      [key, 6],
      [key, 7],
    ]);
    for (const x of again) expect(x.headers['x-svc-recovery']).toBe(r.body.recovery_id);
    // each is the event first attempted, byte for byte
    for (const x of again) expect(x.raw.equals(first.find((f) => f.json.id === x.json.id)!.raw)).toBe(true);
  });
});
