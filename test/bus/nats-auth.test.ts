// `svc nats init` / `svc nats creds` against a real nats-server started from the generated
// nats.conf (CONTRACT 1, 6.7): who may connect, and what each role (engine, worker, producer of
// an org) may and may not do, with the same nats.js / JetStream / KV 3.3.0 calls svc makes.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/wait.ts';
import { connect, createInbox, credsAuthenticator, headers, type Msg, type NatsConnection } from '@nats-io/transport-node';
import { jetstream, jetstreamManager, AckPolicy, RetentionPolicy, type JetStreamManager } from '@nats-io/jetstream';
import { Kvm, type KvWatchEntry } from '@nats-io/kv';
import { natsConnectOptions, type NatsRole } from '../../src/bus/nats/nats-auth.ts';
import { NatsSetupError, readCredsFile } from '../../src/bus/nats/nats-creds.ts';
import { initNatsDir, producerCreds } from '../../src/cli/nats-init/nats-setup.ts';
import {
  DISPATCH_CONSUMER,
  ensureLayout,
  EVENTS_STREAM,
  FACTS_STREAM,
  ORGS_BUCKET,
  OUTCOMES_CONSUMER,
  OUTCOMES_STREAM,
  PROGRESS_BUCKET,
  REGISTRY_BUCKET as WEBHOOKS_BUCKET,
} from '../../src/bus/nats/jetstream.ts';
import { hopSubject, hopWildcard, INGEST_QUEUE_GROUP, ingestWildcard, isProducerReplySubject } from '../../src/bus/subjects.ts';
import { COMPLETE_KEY } from '../../src/bus/nats/kv-orgs.ts';
import { startOrgDirectory } from '../../src/bus/nats/org-directory.ts';
import { findNatsServer, freePort, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.ts';
import { BIN, ROOT } from '../helpers/paths.ts';
import { openDb } from '../../store/db.ts';

const NATS_BIN = findNatsServer();
const dec = new TextDecoder();

interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** `node bin/svc.mjs …`, no SVC_* variables. */
function cli(args: string[]): Promise<CliResult> {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('SVC_'))) as Record<string, string>;
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [BIN, ...args], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (d) => (stdout += d));
    p.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => {
      p.kill('SIGKILL');
      reject(new Error(`svc ${args.join(' ')} timed out\n${stdout}\n${stderr}`));
    }, 25_000);
    p.on('error', reject);
    p.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** A connection with the errors the server sent it (permission violations), in order. */
interface Client {
  nc: NatsConnection;
  errors: Error[];
  violations(): string[];
}

describe.skipIf(NATS_BIN === null)('svc nats init / creds (real nats-server, decentralized JWT auth)', () => {
  let tmp: string;
  let dir: string;
  let port: number;
  let url: string;
  let server: NatsServerHandle;
  let initOut: CliResult;
  const clients: Client[] = [];
  let engine: Client;
  let jsm: JetStreamManager;
  let worker: Client;
  let producerA: Client;
  let producerB: Client;
  /** Subjects of the core-NATS ingest requests the engine received. */
  const ingested: string[] = [];

  async function client(role: NatsRole, credsFile: string, name: string = role, org?: string): Promise<Client> {
    const nc = await connect({ ...natsConnectOptions({ servers: [url], name, credsFile, role, org }), reconnect: false });
    const c: Client = {
      nc,
      errors: [],
      violations: () => c.errors.filter((e) => e.name === 'PermissionViolationError').map((e) => e.message),
    };
    void (async () => {
      for await (const s of nc.status()) if (s.type === 'error') c.errors.push(s.error);
    })();
    clients.push(c);
    return c;
  }

  /** The forbidden message did not reach the engine: the server handled `c`'s messages, then the engine's PING. */
  async function barrier(c: Client): Promise<void> {
    await c.nc.flush();
    await engine.nc.flush();
  }

  async function producerCredsFile(org: string): Promise<string> {
    // `svc nats creds` issues credentials to an org of the database only
    const db = openDb(path.join(tmp, 'svc.db'));
    db.prepare('INSERT OR IGNORE INTO orgs (org_id, name, created_at) VALUES (?, ?, ?)').run(org, org, new Date().toISOString());
    db.close();
    const r = await cli(['nats', 'creds', '--dir', dir, '--org', org, '--db', path.join(tmp, 'svc.db')]);
    expect(r.code, r.stderr).toBe(0);
    const file = path.join(tmp, `${org}.creds`);
    fs.writeFileSync(file, r.stdout, { mode: 0o600 });
    return file;
  }

  beforeAll(async () => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-nats-auth-'));
    dir = path.join(tmp, 'nats');
    port = await freePort();
    url = `nats://127.0.0.1:${port}`;
    initOut = await cli(['nats', 'init', '--dir', dir, '--port', String(port)]);
    expect(initOut.code, initOut.stderr).toBe(0);
    server = await startNatsServer({ config: path.join(dir, 'nats.conf') });

    // The engine sets up what the data plane uses (as the NATS bus does).
    engine = await client('engine', path.join(dir, 'engine.creds'));
    jsm = await jetstreamManager(engine.nc);
    await ensureLayout(engine.nc, jsm); // what svc serve creates at start
    engine.nc.subscribe(ingestWildcard, {
      callback: (_err, m: Msg) => {
        ingested.push(m.subject);
        if (isProducerReplySubject(m.reply, m.subject.split('.')[2])) m.respond(JSON.stringify({ ok: true, subject: m.subject }));
      },
    });
    await engine.nc.flush();

    worker = await client('worker', path.join(dir, 'worker.creds'));
    // Producer credentials are made after the server started: no reload.
    producerA = await client('producer', await producerCredsFile('org_a'), 'producer-a', 'org_a');
    producerB = await client('producer', await producerCredsFile('org_b'), 'producer-b', 'org_b');
  }, 90_000);

  afterAll(async () => {
    await Promise.allSettled(clients.map((c) => c.nc.close()));
    await server?.stop();
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  });

  describe('files', () => {
    it('init writes nats.conf (MEMORY resolver, JetStream inside DIR) and secret files readable by the owner only', () => {
      const conf = fs.readFileSync(path.join(dir, 'nats.conf'), 'utf8');
      expect(conf).toContain(`listen: "127.0.0.1:${port}"`);
      expect(conf).toMatch(/^resolver: MEMORY$/m);
      expect(conf).toMatch(/^resolver_preload: \{$/m);
      expect(conf).toMatch(/^system_account: A[A-Z2-7]{55}$/m);
      expect(conf).toContain(`store_dir: ${JSON.stringify(path.join(dir, 'store'))}`);
      for (const f of ['engine.creds', 'worker.creds', 'producer-signing.nk']) {
        expect((fs.statSync(path.join(dir, f)).mode & 0o777).toString(8), f).toBe('600');
      }
      expect(initOut.stdout).toContain(`nats-server -c ${path.join(dir, 'nats.conf')}`);
      expect(initOut.stdout).toContain(path.join(dir, 'engine.creds'));
      expect(initOut.stdout).toContain(path.join(dir, 'worker.creds'));
    });

    it('engine.creds and worker.creds carry the same 32-byte data-plane key; producer creds none; it is printed nowhere', async () => {
      const e = readCredsFile(path.join(dir, 'engine.creds'));
      const w = readCredsFile(path.join(dir, 'worker.creds'));
      expect(e.dataplaneKey).toBeInstanceOf(Buffer);
      expect(e.dataplaneKey!.length).toBe(32);
      expect(w.dataplaneKey!.equals(e.dataplaneKey!)).toBe(true);
      // the NATS part handed to nats.js does not carry it
      expect(dec.decode(e.creds)).not.toContain(e.dataplaneKey!.toString('base64'));
      expect(readCredsFile(path.join(tmp, 'org_a.creds')).dataplaneKey).toBeNull();
      expect(initOut.stdout + initOut.stderr).not.toContain(e.dataplaneKey!.toString('base64'));
      expect(fs.readFileSync(path.join(dir, 'nats.conf'), 'utf8')).not.toContain(e.dataplaneKey!.toString('base64'));
      // two setups, two keys
      const other = await initNatsDir({ dir: path.join(tmp, 'other'), port: 1 });
      expect(readCredsFile(other.files.engineCreds).dataplaneKey!.equals(e.dataplaneKey!)).toBe(false);
    });

    it('init refuses a directory that already holds a setup (exit 2) and changes nothing', async () => {
      const before = fs.readFileSync(path.join(dir, 'engine.creds'));
      const r = await cli(['nats', 'init', '--dir', dir, '--port', String(port)]);
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(/already holds a NATS setup/);
      expect(r.stdout).toBe('');
      expect(fs.readFileSync(path.join(dir, 'engine.creds')).equals(before)).toBe(true);
    });

    it('init: a DIR that is a file, or a bad port → exit 2', async () => {
      const file = path.join(tmp, 'a-file');
      fs.writeFileSync(file, '');
      const r = await cli(['nats', 'init', '--dir', file]);
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(/cannot use .* as a directory/);
      const p = await cli(['nats', 'init', '--dir', path.join(tmp, 'p'), '--port', '70000']);
      expect(p.code).toBe(2);
      expect(fs.existsSync(path.join(tmp, 'p'))).toBe(false);
    });

    it('creds: an invalid org id, a missing or foreign directory → exit 2 and nothing on stdout', async () => {
      const bad = await cli(['nats', 'creds', '--dir', dir, '--org', 'Org-A']);
      expect(bad.code).toBe(2);
      expect(bad.stderr).toMatch(/invalid org id/);
      expect(bad.stdout).toBe('');
      await expect(producerCreds(dir, 'a'.repeat(65))).rejects.toThrow(/invalid org id/);
      expect(await producerCreds(dir, 'a'.repeat(64))).toContain('-----BEGIN NATS USER JWT-----');
      const missing = await cli(['nats', 'creds', '--dir', path.join(tmp, 'nope'), '--org', 'org_a']);
      expect(missing.code).toBe(2);
      expect(missing.stderr).toMatch(/does not exist/);
      expect(missing.stdout).toBe('');
      await expect(producerCreds(tmp, 'org_a')).rejects.toThrow(/not a directory made by `svc nats init`/);
    });

    it('readCredsFile: clear errors for a missing, a directory, an invalid file, a bad key block; never the content', () => {
      expect(() => readCredsFile(path.join(tmp, 'none.creds'))).toThrow(/does not exist/);
      expect(() => readCredsFile(tmp)).toThrow(/is a directory/);
      const junk = path.join(tmp, 'junk.creds');
      fs.writeFileSync(junk, 'SUAJUNKSEEDSECRET hello\n');
      expect(() => readCredsFile(junk)).toThrow(NatsSetupError);
      let msg = '';
      try {
        readCredsFile(junk);
      } catch (err) {
        msg = (err as Error).message;
      }
      expect(msg).toMatch(/not valid/);
      expect(msg).not.toContain('SUAJUNK');
      const text = fs.readFileSync(path.join(dir, 'worker.creds'), 'utf8');
      const cut = path.join(tmp, 'cut.creds');
      fs.writeFileSync(
        cut,
        text.replace(/(DATAPLANE KEY-----\n)(\S+)/, (_m, a: string, b: string) => a + b.slice(0, 20)),
      );
      expect(() => readCredsFile(cut)).toThrow(/data-plane key block is not 32 bytes/);
      const swapped = path.join(tmp, 'swapped.creds');
      const seed = /-----BEGIN USER NKEY SEED-----\n(\S+)/.exec(text)![1];
      const other = readCredsFile(path.join(dir, 'engine.creds'));
      const otherSeed = /-----BEGIN USER NKEY SEED-----\n(\S+)/.exec(dec.decode(other.creds))![1];
      fs.writeFileSync(swapped, text.replace(seed, otherSeed));
      expect(() => readCredsFile(swapped)).toThrow(/seed does not belong to the user JWT/);
    });

    it('natsConnectOptions: the role inbox prefix, and credentials of another role refused early', () => {
      const w = natsConnectOptions({ servers: [url], name: 'w', credsFile: path.join(dir, 'worker.creds'), role: 'worker' });
      expect(w.inboxPrefix).toBe('_SVC_WORKER_INBOX');
      expect(typeof w.authenticator).toBe('function');
      expect(natsConnectOptions({ servers: [url], name: 'e', role: 'engine' }).inboxPrefix).toBe('_SVC_ENGINE_INBOX');
      const p = natsConnectOptions({ servers: [url], name: 'p', role: 'producer', org: 'org_a', credsFile: null });
      expect(p.authenticator).toBeUndefined();
      expect(p.inboxPrefix).toBe('_INBOX_org_a');
      expect(() => natsConnectOptions({ servers: [url], name: 'p', role: 'producer' })).toThrow(/needs its org/);
      expect(() => natsConnectOptions({ servers: [url], name: 'e', credsFile: path.join(dir, 'worker.creds'), role: 'engine' })).toThrow(
        /may not subscribe to _SVC_ENGINE_INBOX\.>: not credentials for the engine/,
      );
    });
  });

  describe('connecting', () => {
    it('a client without credentials is refused', async () => {
      await expect(connect({ servers: [url], reconnect: false })).rejects.toThrow(/Authorization Violation/i);
    });

    it('credentials of another setup (another operator) are refused', async () => {
      const other = await initNatsDir({ dir: path.join(tmp, 'foreign'), port: 1 });
      await expect(
        connect({
          ...natsConnectOptions({ servers: [url], name: 'x', credsFile: other.files.engineCreds, role: 'engine' }),
          reconnect: false,
        }),
      ).rejects.toThrow(/Authorization Violation/i);
    });

    it('the stock nats.js credsAuthenticator accepts a .creds file with the data-plane key block', async () => {
      const raw = fs.readFileSync(path.join(dir, 'worker.creds'));
      expect(raw.toString()).toContain('-----BEGIN SVC DATAPLANE KEY-----');
      const nc = await connect({
        servers: [url],
        authenticator: credsAuthenticator(raw),
        inboxPrefix: '_SVC_WORKER_INBOX',
        reconnect: false,
      });
      try {
        const c = await jetstream(nc).consumers.get(EVENTS_STREAM, DISPATCH_CONSUMER);
        expect((await c.info(true)).name).toBe(DISPATCH_CONSUMER);
      } finally {
        await nc.close();
      }
    });
  });

  describe('engine', () => {
    it('created the streams, consumers and buckets the data plane uses', async () => {
      const events = await jsm.streams.info(EVENTS_STREAM);
      expect(events.config.retention).toBe(RetentionPolicy.Workqueue);
      expect(events.config.subjects).toEqual([hopWildcard]);
      expect((await jsm.consumers.info(EVENTS_STREAM, DISPATCH_CONSUMER)).config.ack_policy).toBe(AckPolicy.Explicit);
      expect((await jsm.streams.info(OUTCOMES_STREAM)).config.retention).toBe(RetentionPolicy.Workqueue);
      expect((await jsm.consumers.info(OUTCOMES_STREAM, OUTCOMES_CONSUMER)).config.durable_name).toBe(OUTCOMES_CONSUMER);
      expect((await jsm.streams.info(`KV_${WEBHOOKS_BUCKET}`)).config.max_msgs_per_subject).toBe(1);
      expect((await jsm.streams.info(`KV_${PROGRESS_BUCKET}`)).config.max_age).toBe(24 * 60 * 60 * 1e9);
      expect(engine.violations()).toEqual([]);
    });

    it('publishes on svc.control.> to the other engines', async () => {
      const other = await client('engine', path.join(dir, 'engine.creds'), 'engine-2');
      const got: string[] = [];
      other.nc.subscribe('svc.control.>', { callback: (_e, m) => void got.push(m.subject) });
      await other.nc.flush();
      engine.nc.publish('svc.control.changes', '{"webhooks":true}');
      await waitFor(() => got.length === 1, 10_000, 'the control message');
      expect(got).toEqual(['svc.control.changes']);
    });

    it('gets its JetStream replies on _SVC_ENGINE_INBOX, out of reach of producers', async () => {
      const snooped: string[] = [];
      producerA.nc.subscribe('_INBOX_org_a.>', { callback: (_e, m) => void snooped.push(m.subject) });
      await producerA.nc.flush();
      // control: a client with org A's inbox prefix leaks its JetStream replies to A's subscription
      const leaky = await connect({
        servers: [url],
        authenticator: credsAuthenticator(readCredsFile(path.join(dir, 'engine.creds')).creds),
        inboxPrefix: '_INBOX_org_a',
        reconnect: false,
      });
      await (await jetstreamManager(leaky, { checkAPI: false })).streams.info(EVENTS_STREAM);
      await leaky.close();
      await waitFor(() => snooped.length === 1, 10_000, 'the control reply seen on _INBOX_org_a.>');
      // the engine proper: its JetStream replies come to _SVC_ENGINE_INBOX
      await jsm.streams.info(EVENTS_STREAM);
      await jsm.consumers.info(EVENTS_STREAM, DISPATCH_CONSUMER);
      // barrier: A's own request: its reply comes after anything sent to A before
      await producerA.nc.request('svc.ingest.org_a.jobs.snoop', '{}');
      expect(snooped.length).toBe(2); // the control's reply and A's own reply, nothing of the engine's
      expect(engine.violations()).toEqual([]);
    });
  });

  describe('producer of org A', () => {
    it('requests on svc.ingest.A.… and gets the engine reply; org B too, with credentials made after the server started', async () => {
      const r = await producerA.nc.request('svc.ingest.org_a.jobs.job_1', '{"status":"running"}', { timeout: 5000 });
      expect(JSON.parse(dec.decode(r.data))).toEqual({ ok: true, subject: 'svc.ingest.org_a.jobs.job_1' });
      const rb = await producerB.nc.request('svc.ingest.org_b.health.run_1', '{}', { timeout: 5000 });
      expect(JSON.parse(dec.decode(rb.data)).subject).toBe('svc.ingest.org_b.health.run_1');
      expect(producerA.violations()).toEqual([]);
      expect(server.log()).not.toMatch(/reload/i);
    });

    it("may name any reply subject (NATS does not check it): the engine answers only A's own _INBOX_org_a.… replies", async () => {
      const forged: string[] = [];
      const answered: string[] = [];
      const seen = ingested.length;
      const responder = await client('engine', path.join(dir, 'engine.creds'), 'engine-guarded');
      responder.nc.subscribe('svc.ingest.org_a.runners.>', {
        callback: (_e, m) => {
          if (!isProducerReplySubject(m.reply, 'org_a')) return void forged.push(String(m.reply));
          answered.push(m.reply!);
          m.respond('{"ok":true}');
        },
      });
      await responder.nc.flush();
      producerA.nc.publish('svc.ingest.org_a.runners.run_1', '{}', { reply: 'svc.events.org_b.workflow.wf_1.started' });
      // org B's inbox (predictable NUIDs): A must not get the engine to answer B's request
      producerA.nc.publish('svc.ingest.org_a.runners.run_3', '{}', { reply: '_INBOX_org_b.x1.y1' });
      await producerA.nc.request('svc.ingest.org_a.runners.run_2', '{}');
      // another subscriber on svc.ingest.> (the engine of this suite) may answer the request before
      // this responder has read the three messages: wait until it has
      await waitFor(
        () => forged.length + answered.length >= 3,
        10_000,
        () => `the responder to read 3 messages (forged ${forged.length}, answered ${answered.length})`,
      );
      // and until the suite's engine has read them too: read later, they would count as reaching the
      // engine in the next test
      await waitFor(
        () => ingested.slice(seen).filter((s) => s.startsWith('svc.ingest.org_a.runners.')).length >= 3,
        10_000,
        'the engine to read the 3 messages',
      );
      expect(forged).toEqual(['svc.events.org_b.workflow.wf_1.started', '_INBOX_org_b.x1.y1']);
      expect(answered).toHaveLength(1);
      expect(answered[0]).toMatch(/^_INBOX_org_a\./);
      expect(isProducerReplySubject('_INBOX_org_a.abc.def', 'org_a')).toBe(true);
      for (const bad of [
        undefined,
        '',
        '_INBOX.abc',
        '_INBOX_org_a',
        '_INBOX_org_a.>',
        '_INBOX_org_a.*',
        '_INBOX_org_b.abc',
        '_INBOX_org_ab.abc',
        '_SVC_WORKER_INBOX.x',
        'svc.jobs.org_b.r',
        '_INBOX_org_a. x',
      ]) {
        expect(isProducerReplySubject(bad, 'org_a'), String(bad)).toBe(false);
      }
      await responder.nc.close();
    });

    it('cannot publish svc.ingest.B.…: a violation for the client, nothing for the engine', async () => {
      const before = ingested.length;
      producerA.nc.publish('svc.ingest.org_b.jobs.job_9', '{}');
      await expect(producerA.nc.request('svc.ingest.org_b.jobs.job_9', '{}', { timeout: 5000 })).rejects.toThrow(
        /Permissions Violation for Publish to "svc.ingest.org_b.jobs.job_9"/,
      );
      await barrier(producerA);
      await waitFor(() => producerA.violations().length >= 2, 10_000, 'two violations');
      expect(ingested.slice(before)).toEqual([]);
    });

    it('cannot publish svc.events.> nor svc.hop.>, plainly nor with a JetStream publish; nothing reaches SVC_EVENTS', async () => {
      const n = producerA.violations().length;
      producerA.nc.publish('svc.events.org_a.workflow.wf_1.started', '{}');
      producerA.nc.publish(hopSubject, '{}');
      await barrier(producerA);
      await waitFor(() => producerA.violations().length > n + 1, 10_000, 'the plain publish violations');
      expect(producerA.violations().slice(-2).join('\n')).toMatch(/Publish to "svc.events.org_a.workflow.wf_1.started"/);
      expect(producerA.violations().slice(-2).join('\n')).toMatch(/Publish to "svc.hop.events"/);
      await expect(jetstream(producerA.nc).publish(hopSubject, '{}')).rejects.toThrow(/Permissions Violation/);
      expect(await jsm.streams.getMessage(EVENTS_STREAM, { last_by_subj: hopSubject })).toBeNull();
    });

    it('cannot use the JetStream API nor KV', async () => {
      await expect(jetstreamManager(producerA.nc)).rejects.toThrow(/Permissions Violation for Publish to "\$JS\.API\.INFO"/);
      await expect(producerA.nc.request('$JS.API.STREAM.LIST', '{}')).rejects.toThrow(/Permissions Violation/);
      const kv = await new Kvm(producerA.nc).open(PROGRESS_BUCKET); // binding makes no request
      await expect(kv.get('k')).rejects.toThrow(/Permissions Violation/);
      await expect(kv.put('k', 'v')).rejects.toThrow(/Permissions Violation/);
      await expect(jetstream(producerA.nc).consumers.get(EVENTS_STREAM, DISPATCH_CONSUMER)).rejects.toThrow(/Permissions Violation/);
    });

    it('cannot store facts in SVC_FACTS (plain or JetStream publish on svc.facts.>) nor read the org directory', async () => {
      const n = producerA.violations().length;
      producerA.nc.publish('svc.facts.org_a.jobs.job_forged', '{}');
      await barrier(producerA);
      await waitFor(() => producerA.violations().length > n, 10_000, 'the plain publish violation');
      expect(producerA.violations().at(-1)).toMatch(/Publish to "svc.facts.org_a.jobs.job_forged"/);
      await expect(jetstream(producerA.nc).publish('svc.facts.org_a.jobs.job_forged2', '{}')).rejects.toThrow(/Permissions Violation/);
      expect(await jsm.streams.getMessage(FACTS_STREAM, { last_by_subj: 'svc.facts.org_a.jobs.job_forged' })).toBeNull();
      expect(await jsm.streams.getMessage(FACTS_STREAM, { last_by_subj: 'svc.facts.org_a.jobs.job_forged2' })).toBeNull();
      const kv = await new Kvm(producerA.nc).open(ORGS_BUCKET); // binding makes no request
      await expect(kv.status()).rejects.toThrow(/Permissions Violation/);
      await expect(kv.get('org_a')).rejects.toThrow(/Permissions Violation/);
      await expect(kv.watch()).rejects.toThrow(/Permissions Violation/);
      await expect(kv.put('org_x', '{}')).rejects.toThrow(/Permissions Violation/);
    });

    it('receives jobs on svc.jobs.A.>, cannot subscribe svc.jobs.B.>, svc.events.> nor the engine inbox', async () => {
      const jobsA: string[] = [];
      const denied: Array<{ subject: string; got: string[]; err: Error | null }> = [];
      producerA.nc.subscribe('svc.jobs.org_a.>', { callback: (_e, m) => void jobsA.push(m.subject) });
      for (const subject of [
        'svc.jobs.org_b.>',
        'svc.events.>',
        '_SVC_ENGINE_INBOX.>',
        '_SVC_WORKER_INBOX.>',
        '_INBOX.>',
        '_INBOX_org_b.>',
      ]) {
        const d = { subject, got: [] as string[], err: null as Error | null };
        denied.push(d);
        producerA.nc.subscribe(subject, {
          callback: (err, m) => {
            if (err) d.err = err;
            else d.got.push(m.subject);
          },
        });
      }
      await producerA.nc.flush();
      await waitFor(() => denied.every((d) => d.err !== null), 10_000, 'six subscription violations');
      for (const d of denied) expect(d.err!.message).toContain(`Permissions Violation for Subscription to "${d.subject}"`);
      engine.nc.publish('svc.jobs.org_b.runner_1', '{"job":"b"}');
      await jsm.streams.info(EVENTS_STREAM); // a reply on the engine inbox while A asked for it
      await jetstream(engine.nc).publish(hopSubject, '{"wf":3}');
      engine.nc.publish('svc.jobs.org_a.runner_1', '{"job":"a"}');
      await waitFor(() => jobsA.length === 1, 10_000, 'the job of org A');
      expect(jobsA).toEqual(['svc.jobs.org_a.runner_1']);
      await producerA.nc.flush();
      expect(denied.map((d) => d.got)).toEqual([[], [], [], [], [], []]);
      // leave the work queue as it was for the worker tests
      const c = await jetstream(engine.nc).consumers.get(EVENTS_STREAM, DISPATCH_CONSUMER);
      const m = await c.next({ expires: 5000 });
      expect(m?.string()).toBe('{"wf":3}');
      await m!.ackAck();
    });
  });

  describe('worker', () => {
    it('fetches events with headers from svc-dispatch and acks, marks working, naks with a delay, terms', async () => {
      const js = jetstream(engine.nc);
      for (let i = 0; i < 4; i++) {
        const h = headers();
        h.set('Svc-Test', `e${i}`);
        await js.publish(hopSubject, `{"i":${i}}`, { headers: h });
      }
      const c = await jetstream(worker.nc).consumers.get(EVENTS_STREAM, DISPATCH_CONSUMER);
      const seen: string[] = [];
      const it = await c.fetch({ max_messages: 4, expires: 5000 });
      for await (const m of it) {
        const tag = m.headers?.get('Svc-Test') ?? '?';
        seen.push(tag);
        if (tag === 'e0') {
          m.working();
          await m.ackAck();
        } else if (tag === 'e1') m.nak(50);
        else if (tag === 'e2') m.term();
        else m.ack();
      }
      expect(seen).toEqual(['e0', 'e1', 'e2', 'e3']);
      const again = await c.next({ expires: 5000 });
      expect(again?.headers?.get('Svc-Test')).toBe('e1'); // the nak'd one, not the termed one
      expect(again!.info.redelivered).toBe(true);
      expect(await again!.ackAck()).toBe(true);
      await waitFor(
        async () => {
          const ci = await jsm.consumers.info(EVENTS_STREAM, DISPATCH_CONSUMER);
          return ci.num_pending === 0 && ci.num_ack_pending === 0;
        },
        10_000,
        'every event settled',
      );
      await waitFor(async () => (await jsm.streams.info(EVENTS_STREAM)).state.messages === 0, 10_000, 'work queue empty');
      expect(worker.violations()).toEqual([]);
    });

    it('watches the webhook registry (initial values through flow control, then updates) and reads it, read only', async () => {
      const ekv = await new Kvm(engine.nc).open(WEBHOOKS_BUCKET);
      // ~4 MiB of initial values: the server asks the watcher for flow control on 2.9
      const big = new Uint8Array(64 * 1024).fill(0x61);
      for (let i = 0; i < 64; i++) await ekv.put(`wh_${i}`, big);
      await ekv.put('wh_one', '{"url":"https://example.test/one"}');
      const kv = await new Kvm(jetstream(worker.nc)).open(WEBHOOKS_BUCKET);
      // how far the registry goes (the data plane waits until its watch has caught up with it)
      expect((await kv.status()).streamInfo.state.last_seq).toBeGreaterThanOrEqual(65);
      const entries: KvWatchEntry[] = [];
      const watch = await kv.watch();
      const done = (async () => {
        for await (const e of watch) {
          entries.push(e);
          if (e.key === 'wh_two') break;
        }
      })();
      await waitFor(() => entries.length === 65, 20_000, 'the 65 initial values');
      expect(entries.every((e) => !e.isUpdate || e.key === 'wh_one')).toBe(true);
      await ekv.put('wh_two', '{"url":"https://example.test/two"}');
      await done;
      expect(entries.at(-1)!.isUpdate).toBe(true);
      expect((await kv.get('wh_one'))?.string()).toBe('{"url":"https://example.test/one"}');
      expect(await kv.get('wh_missing')).toBeNull();
      await expect(kv.put('wh_three', 'x')).rejects.toThrow(/Permissions Violation/);
      await expect(kv.delete('wh_one')).rejects.toThrow(/Permissions Violation/);
      expect(worker.violations().every((v) => v.includes('$KV.svc_webhooks'))).toBe(true);
      expect(server.log()).not.toMatch(/Violation[^\n]*\$JS\.FC/);
    });

    it("can create watch consumers, and cannot delete any consumer: neither a watch (its own or another's) nor svc-dispatch", async () => {
      const kv = await new Kvm(jetstream(worker.nc)).open(WEBHOOKS_BUCKET);
      const watch = await kv.watch({ key: 'wh_one' });
      const first = await watch[Symbol.asyncIterator]().next();
      expect(first.value?.key).toBe('wh_one');
      const stream = `KV_${WEBHOOKS_BUCKET}`;
      // another watcher's consumer (the engine's), and the worker's own
      const other = await new Kvm(engine.nc).open(WEBHOOKS_BUCKET);
      const otherWatch = await other.watch({ key: 'wh_one' });
      await otherWatch[Symbol.asyncIterator]().next();
      const names: string[] = [];
      for await (const ci of jsm.consumers.list(stream)) names.push(ci.name);
      expect(names.length).toBeGreaterThanOrEqual(2);
      const wjsm = await jetstreamManager(worker.nc, { checkAPI: false });
      for (const name of names) await expect(wjsm.consumers.delete(stream, name)).rejects.toThrow(/Permissions Violation/);
      const after: string[] = [];
      for await (const ci of jsm.consumers.list(stream)) after.push(ci.name);
      expect(after.sort()).toEqual([...names].sort());
      watch.stop();
      otherWatch.stop();
      // nor on other streams, nor streams
      await expect(wjsm.consumers.delete(EVENTS_STREAM, DISPATCH_CONSUMER)).rejects.toThrow(/Permissions Violation/);
      await expect(wjsm.streams.delete(stream)).rejects.toThrow(/Permissions Violation/);
      await expect(wjsm.streams.delete(`KV_${PROGRESS_BUCKET}`)).rejects.toThrow(/Permissions Violation/);
      await expect(
        wjsm.consumers.add(EVENTS_STREAM, { name: 'x', ack_policy: AckPolicy.None, deliver_subject: 'svc.ingest.org_a.jobs.x' }),
      ).rejects.toThrow(/Permissions Violation/);
    });

    it('gets, puts and deletes delivery progress', async () => {
      const n = worker.violations().length;
      const kv = await new Kvm(jetstream(worker.nc)).open(PROGRESS_BUCKET);
      await kv.put('ev_1.wh_1', '{"attempt":1}');
      expect((await kv.get('ev_1.wh_1'))?.string()).toBe('{"attempt":1}');
      await kv.put('ev_1.wh_1', '{"attempt":2}');
      expect((await kv.get('ev_1.wh_1'))?.json()).toEqual({ attempt: 2 });
      await kv.delete('ev_1.wh_1');
      const gone = await kv.get('ev_1.wh_1');
      expect(gone === null || gone.operation === 'DEL').toBe(true);
      const ekv = await new Kvm(engine.nc).open(PROGRESS_BUCKET);
      const seenByEngine = await ekv.get('ev_1.wh_1');
      expect(seenByEngine === null || seenByEngine.operation === 'DEL').toBe(true);
      expect(
        worker
          .violations()
          .slice(n)
          .filter((v) => v.includes('svc_progress')),
      ).toEqual([]);
    });

    it('publishes outcomes into SVC_OUTCOMES (with the publish ack), which the engine consumes', async () => {
      const ack = await jetstream(worker.nc).publish('svc.outcomes.org_a.ev_1', '{"status":"delivered"}');
      expect(ack.stream).toBe(OUTCOMES_STREAM);
      const c = await jetstream(engine.nc).consumers.get(OUTCOMES_STREAM, OUTCOMES_CONSUMER);
      const m = await c.next({ expires: 5000 });
      expect(m?.subject).toBe('svc.outcomes.org_a.ev_1');
      expect(m!.json()).toEqual({ status: 'delivered' });
      await m!.ackAck();
    });

    it('answers ingest requests in the svc-ingest queue group: stores the fact in SVC_FACTS, answers on the reply subject', async () => {
      const n = worker.violations().length;
      const js = jetstream(worker.nc);
      // the gate's part (CONTRACT 9): receive in the queue group, store with a fact id, answer the producer
      const gate = worker.nc.subscribe(ingestWildcard, {
        queue: INGEST_QUEUE_GROUP,
        callback: (_e, m) => {
          if (!m.subject.startsWith('svc.ingest.org_a.gate.')) return;
          const id = m.subject.split('.').at(-1)!;
          const h = headers();
          h.set('Svc-Test', id);
          void js
            .publish(`svc.facts.${m.subject.slice('svc.ingest.'.length)}`, m.data, { msgID: `fact_${id}`, headers: h })
            .then((ack) => m.respond(JSON.stringify({ ok: true, by: 'worker', seq: ack.seq, duplicate: ack.duplicate })));
        },
      });
      await worker.nc.flush();
      // the suite's engine answers svc.ingest.> too (a plain subscription): the producer reads every answer on its inbox
      const inbox = createInbox('_INBOX_org_a');
      const answers: Array<{ by?: string; seq?: number; duplicate?: boolean }> = [];
      producerA.nc.subscribe(inbox, { callback: (_e, m) => void answers.push(m.json()) });
      await producerA.nc.flush();
      producerA.nc.publish('svc.ingest.org_a.gate.f1', '{"status":"running"}', { reply: inbox });
      await waitFor(() => answers.some((a) => a.by === 'worker'), 10_000, "the worker's answer");
      await waitFor(() => ingested.includes('svc.ingest.org_a.gate.f1'), 10_000, 'the engine to read the request too');
      const first = answers.find((a) => a.by === 'worker')!;
      expect(first.duplicate).toBe(false);
      const stored = await jsm.streams.getMessage(FACTS_STREAM, { last_by_subj: 'svc.facts.org_a.gate.f1' });
      expect(stored?.seq).toBe(first.seq);
      expect(stored?.header.get('Svc-Test')).toBe('f1');
      expect(stored?.header.get('Nats-Msg-Id')).toBe('fact_f1');
      expect(stored?.string()).toBe('{"status":"running"}');
      // the same fact id again (a gate's retry) is stored once
      const again = await js.publish('svc.facts.org_a.gate.f1', '{"status":"running"}', { msgID: 'fact_f1' });
      expect(again.duplicate).toBe(true);
      expect(again.seq).toBe(first.seq);
      gate.unsubscribe();
      await worker.nc.flush();
      expect(worker.violations().slice(n)).toEqual([]);
    });

    it('may subscribe svc.ingest.> only in the svc-ingest queue group; answers once per request, and nowhere unasked', async () => {
      const refusals: Error[] = [];
      for (const queue of [undefined, 'other-group']) {
        worker.nc.subscribe(ingestWildcard, { queue, callback: (err) => void (err && refusals.push(err)) });
      }
      await worker.nc.flush();
      await waitFor(() => refusals.length === 2, 10_000, 'two subscription violations');
      for (const e of refusals) expect(e.message).toContain(`Permissions Violation for Subscription to "${ingestWildcard}"`);
      // the response permission: one answer to a request received, none to an inbox that asked nothing
      const inbox = createInbox('_INBOX_org_a');
      const got: string[] = [];
      producerA.nc.subscribe(inbox, { callback: (_e, m) => void got.push(m.string()) });
      await producerA.nc.flush();
      const received: Msg[] = [];
      const sub = worker.nc.subscribe('svc.ingest.org_a.gate.>', {
        queue: INGEST_QUEUE_GROUP,
        callback: (_e, m) => void received.push(m),
      });
      await worker.nc.flush();
      producerA.nc.publish('svc.ingest.org_a.gate.f2', '{}', { reply: inbox });
      await waitFor(() => received.length === 1, 10_000, 'the request');
      await waitFor(() => ingested.includes('svc.ingest.org_a.gate.f2'), 10_000, 'the engine to read the request too');
      const m = worker.violations().length;
      received[0].respond('first');
      received[0].respond('second');
      worker.nc.publish(`${inbox}.unasked`, 'unasked');
      worker.nc.publish(inbox, 'unasked');
      await barrier(worker);
      await waitFor(() => worker.violations().length >= m + 3, 10_000, 'the violations of the second answer and of the unasked ones');
      await producerA.nc.flush();
      // the engine of this suite answers too
      expect(got.filter((g) => !g.startsWith('{"ok":true'))).toEqual(['first']);
      expect(worker.violations().slice(m)).toEqual([
        expect.stringContaining(`Publish to "${inbox}"`),
        expect.stringContaining(`Publish to "${inbox}.unasked"`),
        expect.stringContaining(`Publish to "${inbox}"`),
      ]);
      sub.unsubscribe();
    });

    it('watches the org directory (read only): synced once the engine marked it complete, then every new org', async () => {
      const n = worker.violations().length;
      const ekv = await new Kvm(engine.nc).open(ORGS_BUCKET);
      // ~4 MiB ahead of the orgs (keys that are no org id): the server asks the watcher for flow control on 2.9
      const big = new Uint8Array(64 * 1024).fill(0x61);
      for (let i = 0; i < 64; i++) await ekv.put(`FILL_${i}`, big);
      await ekv.put('org_a', '{"name":"a","created_at":"2026-01-01T00:00:00.000Z"}');
      const dir = startOrgDirectory(worker.nc);
      try {
        await waitFor(() => dir.has('org_a'), 10_000, 'org_a in the directory');
        expect(dir.synced).toBe(false); // no engine has said it put every org yet
        await ekv.put(COMPLETE_KEY, '{}');
        await waitFor(() => dir.synced, 10_000, 'the directory synced');
        await ekv.put('org_b', '{"name":"b","created_at":"2026-01-01T00:00:00.000Z"}');
        await waitFor(() => dir.has('org_b'), 10_000, 'org_b in the directory');
        expect(dir.has('org_c')).toBe(false);
        const kv = await new Kvm(jetstream(worker.nc)).open(ORGS_BUCKET);
        await expect(kv.put('org_c', '{}')).rejects.toThrow(/Permissions Violation/);
        await expect(kv.delete('org_a')).rejects.toThrow(/Permissions Violation/);
        expect(
          worker
            .violations()
            .slice(n)
            .filter((v) => !v.includes(`$KV.${ORGS_BUCKET}`)),
        ).toEqual([]);
        // the stream info, the watch's consumer and its flow control (a producer's refusals are in the log too)
        expect(server.log()).not.toMatch(/nats\.js:worker"[^\n]*Violation[^\n]*KV_svc_orgs/);
      } finally {
        dir.stop();
      }
    });

    it('cannot publish svc.events.> (plain or JetStream) nor svc.ingest.>, nor read outcomes or the JetStream API', async () => {
      const before = ingested.length;
      const n = worker.violations().length;
      worker.nc.publish('svc.events.org_a.workflow.wf_x.started', '{}');
      worker.nc.publish('svc.ingest.org_a.jobs.job_1', '{}');
      await barrier(worker);
      await waitFor(() => worker.violations().length >= n + 2, 10_000, 'two publish violations');
      expect(worker.violations().slice(n)).toEqual([
        expect.stringContaining('Publish to "svc.events.org_a.workflow.wf_x.started"'),
        expect.stringContaining('Publish to "svc.ingest.org_a.jobs.job_1"'),
      ]);
      expect(ingested.slice(before)).toEqual([]);
      await expect(jetstream(worker.nc).publish('svc.events.org_a.workflow.wf_y.started', '{}')).rejects.toThrow(/Permissions Violation/);
      expect(await jsm.streams.getMessage(EVENTS_STREAM, { last_by_subj: 'svc.events.org_a.workflow.wf_x.started' })).toBeNull();
      expect(await jsm.streams.getMessage(EVENTS_STREAM, { last_by_subj: 'svc.events.org_a.workflow.wf_y.started' })).toBeNull();
      await expect(jetstream(worker.nc).consumers.get(OUTCOMES_STREAM, OUTCOMES_CONSUMER)).rejects.toThrow(/Permissions Violation/);
      await expect(jetstreamManager(worker.nc)).rejects.toThrow(/Permissions Violation/);
      const subErr = await new Promise<Error | null>((resolve) => {
        worker.nc.subscribe('_INBOX.>', { callback: (err) => resolve(err) });
      });
      expect(subErr?.message).toContain('Permissions Violation for Subscription to "_INBOX.>"');
    });
  });
});
