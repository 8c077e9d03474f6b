// The org directory of CONTRACT 9 "Durable ingest" against a real nats-server set up by `svc nats
// init` (src/handoff/org-replicator.ts puts the orgs with the engine's credentials,
// src/bus/nats/org-directory.ts reads them with the worker's): an org created in the store, by
// this process or by `svc orgs create --db` beside it, is in a worker's directory within 2 s;
// `synced` says the directory holds every org the engine had; a restart of the engine (or an engine
// on an empty disk) writes nothing and no reader ever loses an org. Then svc serve in NATS mode
// does the same (src/topology/nats.ts).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { ensureLayout, ORGS_BUCKET } from '../../src/bus/nats/jetstream.ts';
import { COMPLETE_KEY, KvOrgsPublisher } from '../../src/bus/nats/kv-orgs.ts';
import { natsConnectOptions, type NatsRole } from '../../src/bus/nats/nats-auth.ts';
import { startOrgDirectory, type NatsOrgDirectory } from '../../src/bus/nats/org-directory.ts';
import { initNatsDir } from '../../src/cli/nats-init/nats-setup.ts';
import { systemClock } from '../../src/domain/clock.ts';
import { OrgReplicator } from '../../src/handoff/org-replicator.ts';
import { openDb, type Db } from '../../store/db.ts';
import { createOrg } from '../../store/orgs.ts';
import { runCliProcess } from '../helpers/cli.ts';
import { findNatsServer, freePort, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.ts';
import { newDbWithOrg, startService, tmpDir } from '../helpers/service.ts';
import { waitFor, within } from '../helpers/wait.ts';

const logger = pino({ level: 'silent' });
/** CONTRACT 9's gate must know a new org soon: the writer looks at the table every second. */
const APPEARS_WITHIN_MS = 2000;

describe.skipIf(findNatsServer() === null)('org directory (svc_orgs) with svc nats init credentials', () => {
  let tmp: string;
  let server: NatsServerHandle;
  let engineNc: NatsConnection;
  let workerNc: NatsConnection;
  let dbPath: string;
  let db: Db;
  let writer: OrgReplicator;
  let reader: NatsOrgDirectory;
  const readers: NatsOrgDirectory[] = [];
  const conns: NatsConnection[] = [];

  async function client(role: NatsRole, creds: string): Promise<NatsConnection> {
    const nc = await connect({ ...natsConnectOptions({ servers: [server.url], name: role, credsFile: creds, role }), reconnect: false });
    conns.push(nc);
    return nc;
  }
  const newWriter = async (store: Db) =>
    new OrgReplicator(store, new KvOrgsPublisher(await new Kvm(jetstream(engineNc)).open(ORGS_BUCKET)), logger, systemClock);
  const newReader = () => {
    const r = startOrgDirectory(workerNc);
    readers.push(r);
    return r;
  };
  const lastSeq = async () => (await (await new Kvm(jetstream(engineNc)).open(ORGS_BUCKET)).status()).streamInfo.state.last_seq;

  beforeAll(async () => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-org-directory-'));
    const nats = await initNatsDir({ dir: path.join(tmp, 'nats'), port: await freePort() });
    server = await startNatsServer({ config: nats.files.conf });
    engineNc = await client('engine', nats.files.engineCreds);
    await ensureLayout(engineNc, await jetstreamManager(engineNc));
    workerNc = await client('worker', nats.files.workerCreds);
    dbPath = path.join(tmp, 'svc.db');
    db = openDb(dbPath);
  }, 60_000);

  afterAll(async () => {
    for (const r of readers) r.stop();
    await writer?.stop();
    db?.close();
    await Promise.allSettled(conns.map((c) => c.close()));
    await server?.stop();
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  });

  it('synced: not while the bucket holds orgs without COMPLETE; from the moment it is, every org the engine had is there', async () => {
    const a = createOrg(db, 'a').org.org_id;
    const b = createOrg(db, 'b').org.org_id;
    reader = newReader();
    // an org put by hand, no COMPLETE: a partial directory (an engine that has not finished its first sync)
    const kv = await new Kvm(jetstream(engineNc)).open(ORGS_BUCKET);
    await kv.put(a, '{"name":"a","created_at":"2026-01-01T00:00:00.000Z"}');
    await waitFor(() => reader.has(a), 10_000, 'org a in the directory');
    expect(reader.synced).toBe(false);
    // what the reader holds at the very moment it says synced
    const atSync = reader.whenSynced().then(() => [reader.has(a), reader.has(b)]);
    writer = await newWriter(db);
    await writer.start();
    expect(writer.synced).toBe(true);
    expect(await within(atSync, 10_000)).toEqual([true, true]);
    expect(reader.synced).toBe(true);
    expect(reader.has('org_unknown')).toBe(false);
    const entry = await kv.get(b);
    expect(entry?.json()).toEqual({ name: 'b', created_at: expect.any(String) });
    expect((await kv.get(COMPLETE_KEY))?.operation).toBe('PUT');
  });

  it('an org created in this process (changed) or in another on the same file is in a worker directory within 2 s', async () => {
    // in process, told at once
    const c = createOrg(db, 'c').org.org_id;
    writer.changed(c);
    await waitFor(() => reader.has(c), APPEARS_WITHIN_MS, 'org c (changed) in the directory');
    // another connection to the file, nobody told: the next look at the table finds it
    const other = openDb(dbPath);
    const d = createOrg(other, 'd').org.org_id;
    other.close();
    await waitFor(() => reader.has(d), APPEARS_WITHIN_MS, 'org d (another connection) in the directory');
  });

  it('an org created by `svc orgs create --db` beside the engine is in a worker directory within 2 s', async () => {
    const r = await runCliProcess(['orgs', 'create', '--name', 'from-cli', '--db', dbPath]);
    expect(r.code, r.stderr).toBe(0);
    const orgId = r.json.org_id as string;
    await waitFor(() => reader.has(orgId), APPEARS_WITHIN_MS, 'the CLI org in the directory');
    // and in a reader started now, once synced
    const late = newReader();
    await within(late.whenSynced(), 10_000);
    expect(late.synced).toBe(true);
    expect(late.has(orgId)).toBe(true);
  });

  it('a restart of the engine on an existing bucket writes nothing, and no reader ever loses an org or its sync', async () => {
    const orgIds = (db.prepare('SELECT org_id FROM orgs').all() as Array<{ org_id: string }>).map((o) => o.org_id);
    expect(orgIds.every((o) => reader.has(o))).toBe(true);
    const flaps: string[] = [];
    // looks at the reader on every turn of the timers while the writers come and go
    const sampler = setInterval(() => {
      if (!reader.synced) flaps.push('synced');
      for (const o of orgIds) if (!reader.has(o)) flaps.push(o);
    }, 2);
    try {
      const seq = await lastSeq();
      await writer.stop();
      writer = await newWriter(db);
      await writer.start();
      expect(writer.synced).toBe(true);
      expect(await lastSeq()).toBe(seq);
      // an engine on an empty disk: it has no org, and removes none
      const emptyDb = openDb(path.join(tmp, 'empty.db'));
      try {
        const bare = await newWriter(emptyDb);
        await bare.start();
        expect(bare.synced).toBe(true);
        await bare.stop();
      } finally {
        emptyDb.close();
      }
      expect(await lastSeq()).toBe(seq);
      // the restarted writer still follows the table
      const e = createOrg(db, 'e').org.org_id;
      await waitFor(() => reader.has(e), APPEARS_WITHIN_MS, 'org e in the directory');
      expect(await lastSeq()).toBe(seq + 1);
    } finally {
      clearInterval(sampler);
    }
    expect(flaps).toEqual([]);
  });
});

describe.skipIf(findNatsServer() === null)('org directory: before the bucket exists, and svc serve in NATS mode', () => {
  let server: NatsServerHandle;
  let nc: NatsConnection;
  beforeAll(async () => {
    server = await startNatsServer();
    nc = await connect({ servers: server.url });
  });
  afterAll(async () => {
    await nc?.close();
    await server?.stop();
  });

  it('a reader started before any svc serve (no bucket yet) syncs once svc serve has put its orgs; new orgs follow', async () => {
    const reader = startOrgDirectory(nc);
    try {
      expect(reader.synced).toBe(false);
      const { db, org } = newDbWithOrg('before');
      const svc = await startService({ db, natsUrl: server.url });
      try {
        await within(reader.whenSynced(), 15_000);
        expect(reader.synced).toBe(true);
        expect(reader.has(org.org_id)).toBe(true);
        // created beside svc serve on its database (as `svc orgs create --db` does)
        const later = svc.createOrg('later');
        await waitFor(() => reader.has(later.org_id), APPEARS_WITHIN_MS, 'the new org in the directory');
      } finally {
        await svc.stop();
      }
    } finally {
      reader.stop();
    }
  }, 60_000);

  it('a reader whose NATS server restarts watches again: it keeps what it knew, stays synced, and sees orgs put afterwards', async () => {
    const storeDir = tmpDir('svc-org-directory-restart-');
    const port = await freePort();
    let own = await startNatsServer({ port, storeDir });
    const opts = { servers: own.url, reconnectTimeWait: 100, maxReconnectAttempts: -1 };
    const engine = await connect(opts);
    const gate = await connect(opts);
    const store = openDb(path.join(storeDir, 'svc.db'));
    const first = createOrg(store, 'first').org.org_id;
    await ensureLayout(engine, await jetstreamManager(engine));
    const writer = new OrgReplicator(store, new KvOrgsPublisher(await new Kvm(jetstream(engine)).open(ORGS_BUCKET)), logger);
    const reader = startOrgDirectory(gate);
    try {
      await writer.start();
      await within(reader.whenSynced(), 10_000);
      expect(reader.has(first)).toBe(true);
      await own.stop();
      own = await startNatsServer({ port, storeDir });
      expect(reader.synced).toBe(true);
      expect(reader.has(first)).toBe(true);
      // put once both connections are back (the writer tries again at its next look if it is not)
      const second = createOrg(store, 'second').org.org_id;
      await waitFor(() => reader.has(second), 15_000, 'the org put after the restart in the directory');
      expect(reader.has(first)).toBe(true);
    } finally {
      reader.stop();
      await writer.stop();
      store.close();
      await Promise.allSettled([engine.close(), gate.close()]);
      await own.stop();
      fs.rmSync(storeDir, { recursive: true, force: true });
    }
  }, 60_000);
});
