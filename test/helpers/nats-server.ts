/**
 * Starts a private nats-server (JetStream on, random port, temp store dir) for a test file.
 * Never the system server on 4222.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import net from 'node:net';
import { delimiter, dirname, join } from 'node:path';

const DIRS = ['/usr/sbin', '/usr/bin', '/usr/local/bin', '/usr/local/sbin'];

function isExecutable(file: string): boolean {
  try {
    if (!statSync(file).isFile()) return false;
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** Same search as scripts/ensure-test-tools.mjs: $SVC_NATS_SERVER, the usual dirs, then $PATH. */
export function findNatsServer(): string | null {
  const fromEnv = process.env.SVC_NATS_SERVER;
  if (fromEnv && isExecutable(fromEnv)) return fromEnv;
  for (const dir of DIRS) {
    const file = join(dir, 'nats-server');
    if (isExecutable(file)) return file;
  }
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (dir && isExecutable(join(dir, 'nats-server'))) return join(dir, 'nats-server');
  }
  return null;
}

export interface NatsServerHandle {
  url: string;
  port: number;
  /** everything the server printed so far */
  log(): string;
  stop(): Promise<void>;
  /** kill -9 (no shutdown: what it had not written to its store is lost); resolves once it is gone. The store dir stays. */
  kill(): Promise<void>;
}

/** A free TCP port on 127.0.0.1 (for a server that must be told its port up front). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

const running = new Set<ChildProcess>();
process.once('exit', () => {
  for (const p of running) p.kill('SIGKILL');
});

/**
 * A private nats-server: JetStream in a temp dir on a random port, or, with `config`, the server
 * that configuration file describes (e.g. the output of `svc nats init`).
 */
export async function startNatsServer(
  opts: { timeoutMs?: number; config?: string; port?: number; storeDir?: string } = {},
): Promise<NatsServerHandle> {
  const bin = findNatsServer();
  if (!bin) {
    throw new Error('nats-server not found: install it with `apt-get install -y nats-server` or set SVC_NATS_SERVER');
  }
  // a given store dir is the caller's (it outlives this server: a restart on it keeps JetStream's data)
  const dir = opts.storeDir ?? mkdtempSync(join(tmpdir(), 'svc-nats-'));
  const args = opts.config ? ['-c', opts.config] : ['-a', '127.0.0.1', '-p', String(opts.port ?? -1), '-js', '-sd', dir];
  // run in the store's dir (or the configuration's): a server that loses its store dir under it (a
  // cluster test's wiped disk) writes consumer files (meta.inf, meta.sum) relative to its working dir
  const child = spawn(bin, args, {
    cwd: opts.config ? dirname(opts.config) : dir,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  running.add(child);
  let log = '';
  let port = 0;

  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stop = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const t = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(t);
    }
    running.delete(child);
    if (!opts.storeDir) rmSync(dir, { recursive: true, force: true });
  };

  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`nats-server did not become ready:\n${log}`)), opts.timeoutMs ?? 10_000);
      const onData = (chunk: Buffer) => {
        log += chunk.toString();
        const m = /Listening for client connections on [^\s:]+:(\d+)/.exec(log);
        if (m) port = Number(m[1]);
        if (port && log.includes('Server is ready')) {
          clearTimeout(timer);
          resolve();
        }
      };
      child.stdout!.on('data', onData);
      child.stderr!.on('data', onData);
      child.once('error', (err) => {
        clearTimeout(timer);
        reject(err);
      });
      child.once('exit', (code, signal) => {
        clearTimeout(timer);
        reject(new Error(`nats-server exited (${code ?? signal}):\n${log}`));
      });
    });
  } catch (err) {
    await stop();
    throw err;
  }
  const kill = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await exited;
    }
    running.delete(child);
  };
  // keep draining output so the pipe never fills
  return { url: `nats://127.0.0.1:${port}`, port, log: () => log, stop, kill };
}
