// One `svc serve` per database (CONTRACT 1): a second `svc serve` on a database a running one holds
// (another port, another path to the same file) exits 1 naming the holder, before it changes
// anything; the database commands work beside the holder; a holder killed with kill -9 does not
// block the next start (the lock is the kernel's and goes with the process). The lock is the file's
// (CONTRACT 8): a database file with a hard link is refused, whichever name is used. A port taken by
// another process ends the start at once (exit 1, `error: port <p> is in use`), releasing the
// database; SIGTERM ends a start at any moment of it (a NATS connect, before the port is bound).
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { children, spawnService } from '../helpers/child-service.ts';
import { runCliProcess } from '../helpers/cli.ts';
import { BIN, ROOT } from '../helpers/paths.ts';
import { newDbWithOrg, startService, testServeConfig, tmpDir, waitFor } from '../helpers/service.ts';
import { lockStore, StoreHardLinkedError, StoreInUseError } from '../../store/lock.ts';
import { PortInUseError, startServer } from '../../src/server.ts';
import { openDb } from '../../store/db.ts';
import { pause } from '../helpers/wait.ts';

/** A TCP port held by a plain listener (not svc), and its close. */
async function holdPort(
  onConnection: (s: net.Socket) => void = () => {},
): Promise<{ port: number; sockets: net.Socket[]; close(): Promise<void> }> {
  const sockets: net.Socket[] = [];
  const server = net.createServer((s) => {
    sockets.push(s);
    onConnection(s);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    sockets,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

/** `svc serve <args>` as a child process, not waited for: its exit (and when), and its output so far. */
function spawnServe(args: string[]): {
  proc: ChildProcess;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>;
  output: () => string;
} {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('SVC_')));
  const proc = spawn(process.execPath, [BIN, 'serve', '--drift-interval', 'off', ...args], {
    cwd: ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(proc);
  let out = '';
  proc.stdout!.on('data', (d: Buffer) => (out += d));
  proc.stderr!.on('data', (d: Buffer) => (out += d));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>((resolve) =>
    proc.once('exit', (code, signal) => {
      children.delete(proc);
      resolve({ code, signal, at: Date.now() });
    }),
  );
  return { proc, exited, output: () => out };
}

afterAll(() => {
  for (const c of children) c.kill('SIGKILL');
});

describe('svc serve holds its database', () => {
  it('a second serve on the same file exits 1 naming the holder; orgs create works beside it; after kill -9 a new one ' +
    'listens at once', async () => {
    const { db } = newDbWithOrg('lock');
    const first = await spawnService(db);
    const since = Date.now();

    // another port, the in-process bus: refused, exit 1, the message names the holder's pid
    const second = await runCliProcess(['serve', '--port', '0', '--db', db, '--drift-interval', 'off']);
    expect(second.code).toBe(1);
    expect(second.stdout).not.toContain('listening on');
    const m = new RegExp(
      `^error: ${db.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} is in use by svc serve \\(pid (\\d+), since ([^)]+)\\)\\n$`,
    ).exec(second.stderr);
    expect(m, second.stderr).not.toBeNull();
    expect(Number(m![1])).toBe(first.proc.pid);
    expect(Math.abs(Date.parse(m![2]) - since)).toBeLessThan(30_000);

    // the same file by another path (a symlinked directory): the same lock
    const link = path.join(tmpDir('svc-lock-link-'), 'dir');
    fs.symlinkSync(path.dirname(db), link);
    const viaLink = await runCliProcess(['serve', '--port', '0', '--db', path.join(link, 'svc.db'), '--drift-interval', 'off']);
    expect(viaLink.code).toBe(1);
    expect(viaLink.stderr).toContain(`is in use by svc serve (pid ${first.proc.pid},`);

    // the same file by a hard link (another name in another directory, where another lock file
    // would sit): refused, by either name, before anything is opened; fine again once it is gone
    const hard = path.join(tmpDir('svc-lock-hard-'), 'other.db');
    fs.linkSync(db, hard);
    for (const name of [hard, db]) {
      const r = await runCliProcess(['serve', '--port', '0', '--db', name, '--drift-interval', 'off']);
      expect(r.code, r.stderr).toBe(1);
      expect(r.stdout).not.toContain('listening on');
      expect(r.stderr).toBe(
        `error: ${name} has 2 hard links: svc serve refuses a database file with more than one name (remove the other links)\n`,
      );
    }
    expect(fs.existsSync(`${hard}.lock`)).toBe(false);
    fs.unlinkSync(hard);

    // the database commands work beside the holder
    const org = await runCliProcess(['orgs', 'create', '--name', 'beside', '--db', db]);
    expect(org.code).toBe(0);
    expect(org.json.org_id).toMatch(/^[a-z0-9_]+$/);
    const token = await runCliProcess(['tokens', 'create', '--org', org.json.org_id, '--db', db]);
    expect(token.code).toBe(0);
    expect(
      (
        await fetch(`${first.url}/v1/orgs/current/webhooks`, {
          headers: { authorization: `Bearer ${token.json.api_token}`, 'x-svc-org-id': org.json.org_id },
        })
      ).status,
    ).toBe(200);

    // kill -9: the next start is not blocked
    first.proc.kill('SIGKILL');
    await first.exited;
    const killedAt = Date.now();
    const third = await spawnService(db);
    expect(Date.now() - killedAt).toBeLessThan(15_000);
    expect((await fetch(`${third.url}/healthz`)).status).toBe(200);
    third.proc.kill('SIGTERM');
    expect((await third.exited).code).toBe(0);
    // and after a clean stop, too
    const fourth = await spawnService(db);
    fourth.proc.kill('SIGTERM');
    expect((await fourth.exited).code).toBe(0);
  }, 90_000);

  it('in process: a held lock refuses a second take with the holder, and is free again once released', () => {
    const db = path.join(tmpDir('svc-lock-'), 'svc.db');
    const held = lockStore(db);
    let refused: unknown;
    try {
      lockStore(db);
    } catch (err) {
      refused = err;
    }
    expect(refused).toBeInstanceOf(StoreInUseError);
    expect((refused as StoreInUseError).holder?.pid).toBe(process.pid);
    expect(fs.existsSync(db)).toBe(false); // the database itself is not touched
    held.release();
    lockStore(db).release();
  });

  it('in process: a hard-linked database is refused by any of its names; a symlink and :memory: are not', () => {
    const dir = tmpDir('svc-lock-');
    const db = path.join(dir, 'svc.db');
    openDb(db).close();
    const link = path.join(dir, 'link.db');
    fs.symlinkSync(db, link);
    lockStore(link).release(); // a symlink is the same file by a path that resolves to its name
    const hard = path.join(tmpDir('svc-lock-hard-'), 'svc.db');
    fs.linkSync(db, hard);
    for (const name of [db, hard, link]) {
      expect(() => lockStore(name)).toThrow(StoreHardLinkedError);
    }
    fs.unlinkSync(hard);
    lockStore(link).release();
    const mem = lockStore(':memory:');
    lockStore(':memory:').release();
    mem.release();
  });
});

describe('svc serve start-up ends when it must', () => {
  it('a port taken by another process: exit 1 at once with `error: port <p> is in use`, the database released', async () => {
    const { db } = newDbWithOrg('port');
    const taken = await holdPort();
    try {
      // what the process's own start costs (node, the command's modules): a usage error, refused as
      // soon as the options are read
      let t0 = Date.now();
      const usage = await runCliProcess(['serve', '--port', String(taken.port), '--db', db, '--nats-replicas', '1']);
      const baseline = Date.now() - t0;
      expect(usage.code).toBe(2);
      t0 = Date.now();
      const r = await runCliProcess(['serve', '--port', String(taken.port), '--db', db, '--drift-interval', 'off'], {}, undefined, 20_000);
      const ms = Date.now() - t0;
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr).toBe(`error: port ${taken.port} is in use\n`);
      expect(r.stdout).not.toContain('listening on');
      // it used to hang for good (holding the lock, deaf to SIGTERM)
      expect(ms - baseline, `exited after ${ms} ms, a usage error after ${baseline} ms`).toBeLessThan(2000);
    } finally {
      await taken.close();
    }
    // nothing holds the database: the next serve on it starts, and stops cleanly
    const next = await spawnService(db);
    expect((await fetch(`${next.url}/healthz`)).status).toBe(200);
    next.proc.kill('SIGTERM');
    expect((await next.exited).code).toBe(0);
  }, 60_000);

  it('in process: startServer on a taken port rejects within 2 s with PortInUseError and closes the database it opened', async () => {
    const taken = await startService();
    try {
      const port = Number(new URL(taken.url).port);
      const db = path.join(tmpDir('svc-port-'), 'svc.db');
      const t0 = Date.now();
      const err = await startServer(testServeConfig(db, { port, natsReplicas: null, maxWebhooksPerOrg: 100 }), {
        logger: pino({ level: 'silent' }),
      }).then(
        () => null,
        (e: unknown) => e,
      );
      expect(Date.now() - t0).toBeLessThan(2000);
      expect(err).toBeInstanceOf(PortInUseError);
      expect((err as Error).message).toBe(`port ${port} is in use`);
      // every handle of it is closed (no descriptor of this process names the database or its
      // journal), and the next start on it goes through
      const open = fs.readdirSync('/proc/self/fd').flatMap((fd) => {
        try {
          return [fs.readlinkSync(`/proc/self/fd/${fd}`)];
        } catch {
          return [];
        }
      });
      expect(open.filter((f) => f.startsWith(db))).toEqual([]);
      const again = await startService({ db });
      await again.stop();
    } finally {
      await taken.stop();
    }
  });

  it('SIGTERM while it connects to NATS: exits 0 at once and releases the database', async () => {
    const { db } = newDbWithOrg('sigterm');
    // a "NATS server" that accepts the connection and never says a word: the connect waits (5 s)
    let connected = false;
    const silent = await holdPort(() => (connected = true));
    try {
      const child = spawnServe(['--port', '0', '--db', db, '--nats', `nats://127.0.0.1:${silent.port}`]);
      await waitFor(() => connected, 30_000, 'svc serve to connect to the NATS port');
      const killedAt = Date.now();
      child.proc.kill('SIGTERM');
      const { code, at } = await child.exited;
      expect(code, child.output()).toBe(0);
      expect(at - killedAt, child.output()).toBeLessThan(2000);
      expect(child.output()).not.toContain('listening on');
      expect(child.output()).toContain('start-up abandoned');
    } finally {
      await silent.close();
    }
    const next = await spawnService(db);
    next.proc.kill('SIGTERM');
    expect((await next.exited).code).toBe(0);
  }, 60_000);

  it('SIGTERM at moments of an embedded start: each ends promptly (0 once svc handles it), and the database is free ' +
    'after each', async () => {
    const { db } = newDbWithOrg('sigterm-early');
    // the first moments: modules loading, the store opening, the delivery thread starting, the port
    // bound; how far each got is printed (`start-up abandoned` or `listening on`)
    for (const delayMs of [150, 400, 700, 1000, 1300]) {
      const child = spawnServe(['--port', '0', '--db', db]);
      await pause(delayMs, 'a moment of a real process starting up: SIGTERM lands where it has got to by then');
      const killedAt = Date.now();
      child.proc.kill('SIGTERM');
      const { code, signal, at } = await child.exited;
      // before the command's handlers are in (node still loading): the default action, killed by the signal
      if (code === null) expect(signal).toBe('SIGTERM');
      else expect(code, child.output()).toBe(0);
      expect(at - killedAt, child.output()).toBeLessThan(5000);
    }
    const next = await spawnService(db);
    next.proc.kill('SIGTERM');
    expect((await next.exited).code).toBe(0);
  }, 90_000);
});
