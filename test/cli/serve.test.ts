// `svc serve` options (CONTRACT 1): usage errors, environment variables, schema version guard, SIGTERM.
// Usage errors run in this process (they stop at option parsing, before any server starts); the
// schema guard and the lifecycle run the real binary, as a process that exits.
import { spawn } from 'node:child_process';
import path from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { parseDuration, parsePort } from '../../src/config.ts';
import { openDb } from '../../store/db.ts';
import { MIGRATIONS } from '../../store/migrations.ts';
import { runCli, runCliProcess } from '../helpers/cli.ts';
import { tmpDir } from '../helpers/service.ts';
import { BIN } from '../helpers/paths.ts';

/** `svc serve <args>` in this process, for usage errors: it must stop before a server starts (which would add its SIGTERM handler). */
async function serveUsage(args: string[], env: Record<string, string> = {}) {
  const handlers = process.listenerCount('SIGTERM');
  const r = await runCli(['serve', ...args], env);
  expect(process.listenerCount('SIGTERM'), `svc serve ${args.join(' ')} started a server`).toBe(handlers);
  return { status: r.code, stderr: r.stderr };
}

describe('durations and ports', () => {
  it('parses the contract formats', () => {
    expect(parseDuration('500ms')).toBe(500);
    expect(parseDuration('2s')).toBe(2000);
    expect(parseDuration('15m')).toBe(900_000);
    expect(parseDuration('24h')).toBe(86_400_000);
    for (const bad of ['', '5', 's', '-1s', '1.5.2m', '10 parsecs', '0s']) expect(() => parseDuration(bad)).toThrow();
    expect(parsePort('0')).toBe(0);
    for (const bad of ['-1', '65536', 'http', '80a']) expect(() => parsePort(bad)).toThrow();
  });
});

describe('svc serve usage errors', () => {
  it('an unknown option prints the usage and exits 2', async () => {
    const r = await serveUsage(['--bogus']);
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/unknown option '--bogus'/);
    expect(r.stderr).toMatch(/Usage: svc serve/);
  });

  it.each([
    [['--port', 'eighty']],
    [['--runner-health-interval', 'soon']],
    [['--delivery-timeout', '5']],
    [['--drift-interval', 'weekly']],
    [['--nats', 'not a url']],
    [['--nats', 'nats://127.0.0.1:4222,http://127.0.0.1:4223']],
    [['--nats', 'nats://127.0.0.1:4222', '--nats-replicas', '0']],
    [['--nats', 'nats://127.0.0.1:4222', '--nats-replicas', '7']],
    [['--max-webhooks-per-org', '0']],
  ])('a bad value %j prints the usage and exits 2', async (args) => {
    const r = await serveUsage(args);
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/Usage: svc serve/);
  });

  it('--nats-replicas without --nats is a usage error (exit 2)', async () => {
    const r = await serveUsage(['--nats-replicas', '3']);
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/--nats-replicas needs --nats/);
  });

  it('a bad environment value is a usage error too', async () => {
    const r = await serveUsage(['--port', '0'], { SVC_DELIVERY_TIMEOUT: 'forever' });
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/forever/);
    const limit = await serveUsage(['--port', '0'], { SVC_MAX_WEBHOOKS_PER_ORG: 'many' });
    expect(limit.status).toBe(2);
    expect(limit.stderr).toMatch(/many/);
  });
});

describe('schema versions', () => {
  it('refuses a database with a newer schema than the code knows: exit 1 with the reason', async () => {
    const file = path.join(tmpDir(), 'svc.db');
    openDb(file).close();
    const db = new Database(file);
    db.pragma(`user_version = ${MIGRATIONS.length + 1}`);
    db.close();
    const r = await runCliProcess(['serve', '--port', '0', '--db', file], {}, undefined, 20_000);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/newer than this svc understands/);
  });
});

describe('svc serve lifecycle', () => {
  it('prints "listening on" with the bound address, honours SVC_PORT/SVC_HOST, and exits 0 on SIGTERM', async () => {
    const dir = tmpDir();
    const child = spawn(process.execPath, [BIN, 'serve'], {
      env: { ...process.env, SVC_PORT: '0', SVC_HOST: '127.0.0.1', SVC_DB: path.join(dir, 'svc.db') },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    const url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no listening line: ${out}`)), 20_000);
      child.stdout.on('data', (d: Buffer) => {
        out += d;
        const m = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(out);
        if (m) {
          clearTimeout(timer);
          resolve(m[1]);
        }
      });
    });
    const res = await fetch(`${url}/metrics`);
    expect(res.status).toBe(200);
    expect(await res.text()).toMatch(/svc_deliveries_total/);
    const code = await new Promise<number | null>((resolve) => {
      child.once('exit', (c) => resolve(c));
      child.kill('SIGTERM');
    });
    expect(code).toBe(0);
  });
});
