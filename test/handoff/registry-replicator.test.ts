// The webhook registry replicated to NATS KV (src/handoff/registry-replicator.ts,
// src/bus/nats/kv-registry.ts): at start only what the replica lacks or holds otherwise is published;
// changes carry a growing version; entries are encrypted, and one that does not open with the key
// is refused.
import path from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { Kvm, type KV } from '@nats-io/kv';
import { ensureLayout, REGISTRY_BUCKET } from '../../src/bus/nats/jetstream.ts';
import { KvRegistryPublisher, watchRegistry } from '../../src/bus/nats/kv-registry.ts';
import { newDataplaneKey, Seal } from '../../src/bus/seal.ts';
import type { WebhookEntry } from '../../src/domain/webhook-entry.ts';
import { RegistryReplicator } from '../../src/handoff/registry-replicator.ts';
import { openDb, type Db } from '../../store/db.ts';
import { createOrg } from '../../store/orgs.ts';
import { deleteWebhook, insertWebhook, updateWebhook } from '../../store/webhooks.ts';
import { findNatsServer, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.ts';
import { tmpDir, waitFor } from '../helpers/service.ts';

const logger = pino({ level: 'silent' });

describe.skipIf(findNatsServer() === null)('webhook registry on NATS KV', () => {
  let nats: NatsServerHandle;
  let nc: NatsConnection;
  let kv: KV;
  let db: Db;
  let orgId: string;
  const seal = new Seal(newDataplaneKey());

  beforeAll(async () => {
    nats = await startNatsServer();
    nc = await connect({ servers: nats.url });
    await ensureLayout(nc, await jetstreamManager(nc));
    kv = await new Kvm(jetstream(nc)).open(REGISTRY_BUCKET);
    db = openDb(path.join(tmpDir('svc-registry-'), 'svc.db'));
    orgId = createOrg(db, 'registry').org.org_id;
  });
  afterAll(async () => {
    db?.close();
    await nc?.close();
    await nats?.stop();
  });

  const hook = (id: string, url: string) =>
    insertWebhook(db, {
      webhook_id: id,
      org_id: orgId,
      url,
      secret: 's3cret',
      previous_secret: null,
      previous_secret_expires_at: null,
      interests: { all_events: true },
      match: null,
      match_canonical: '',
    });
  const lastSeq = async () => (await kv.status()).streamInfo.state.last_seq;

  it('publishes at start only what differs; a restart with nothing changed publishes nothing', async () => {
    hook('wh_a', 'https://a.example.test/h');
    hook('wh_b', 'https://b.example.test/h');
    const relay = new RegistryReplicator(db, new KvRegistryPublisher(kv, seal), logger);
    await relay.syncAll();
    expect(relay.version).toBe(1);
    expect(await lastSeq()).toBe(2);

    // a restart: the replica agrees, nothing is written, the version stays
    const again = new RegistryReplicator(db, new KvRegistryPublisher(kv, seal), logger);
    await again.syncAll();
    expect(again.version).toBe(1);
    expect(await lastSeq()).toBe(2);

    // changed while no relay ran: one webhook updated, one deleted, and a stray key in the replica
    updateWebhook(db, {
      org_id: orgId,
      webhook_id: 'wh_a',
      secret: 'rotated',
      previous_secret: null,
      previous_secret_expires_at: null,
      interests: { all_events: true },
      match: null,
      match_canonical: '',
    });
    deleteWebhook(db, orgId, 'wh_b');
    await new KvRegistryPublisher(kv, seal).publish(orgId, 'wh_stray', 1, {
      webhook_id: 'wh_stray',
      org_id: orgId,
      url: 'https://x.example.test',
      secret: null,
      previous_secret: null,
      previous_secret_expires_at: null,
      interests: { all_events: true },
      match: null,
    });
    const third = new RegistryReplicator(db, new KvRegistryPublisher(kv, seal), logger);
    await third.syncAll();
    expect(third.version).toBe(2);
    const replica = await new KvRegistryPublisher(kv, seal).replicated();
    expect(replica.get(`${orgId}.wh_a`)?.secret).toBe('rotated');
    expect(replica.get(`${orgId}.wh_b`)).toBeNull(); // a tombstone
    expect(replica.get(`${orgId}.wh_stray`)).toBeNull();
  });

  it('a data plane watching the registry gets every entry and change with its version, and refuses an entry it cannot open', async () => {
    const applied: Array<{ id: string; v: number; entry: WebhookEntry | null }> = [];
    const refused: string[] = [];
    const watch = await watchRegistry(kv, seal, {
      apply: (_o, id, v, entry) => void applied.push({ id, v, entry }),
      refused: (key) => void refused.push(key),
    });
    await watch.ready;
    expect(applied.find((a) => a.id === 'wh_a')?.entry?.secret).toBe('rotated');

    const relay = new RegistryReplicator(db, new KvRegistryPublisher(kv, seal), logger);
    hook('wh_c', 'https://c.example.test/h');
    relay.changed(orgId, 'wh_c');
    await relay.settled();
    await waitFor(() => applied.some((a) => a.id === 'wh_c' && a.v === relay.version), 5000, 'the new entry at its version');

    // an entry sealed with another key (or forged): refused, never applied
    await new KvRegistryPublisher(kv, new Seal(newDataplaneKey())).publish(orgId, 'wh_evil', 99, {
      webhook_id: 'wh_evil',
      org_id: orgId,
      url: 'https://evil.example.test',
      secret: null,
      previous_secret: null,
      previous_secret_expires_at: null,
      interests: { all_events: true },
      match: null,
    });
    await waitFor(() => refused.includes(`${orgId}.wh_evil`), 5000, 'the forged entry refused');
    expect(applied.some((a) => a.id === 'wh_evil')).toBe(false);
    watch.stop();
  });
});
