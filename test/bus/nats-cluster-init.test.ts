// `svc nats init --cluster 3` (CONTRACT 1 "NATS clusters"): three server configurations with routes
// between them, JetStream with a store each, the same accounts and credentials as the single-server
// init; the three start as a cluster with Debian's nats-server 2.9, and svc's engine credentials
// set up the layout on it with 3 replicas.
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { jetstreamManager } from '@nats-io/jetstream';
import { afterAll, describe, expect, it } from 'vitest';
import { connectNats } from '../../src/bus/nats/nats-connection.ts';
import { ensureLayout, LAYOUT_STREAMS } from '../../src/bus/nats/jetstream.ts';
import { findNatsServer, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.ts';
import { runCli } from '../helpers/cli.ts';
import { tmpDir, waitFor } from '../helpers/service.ts';

function isFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

/** A first port of `n` consecutive free ports on 127.0.0.1. */
async function freeRun(n: number): Promise<number> {
  for (;;) {
    const base = 20_000 + Math.floor(Math.random() * 40_000);
    let ok = true;
    for (let i = 0; i < n && ok; i++) ok = await isFree(base + i);
    if (ok) return base;
  }
}

describe('svc nats init --cluster', () => {
  const tmp = tmpDir('svc-nats-cluster-init-');
  const servers: NatsServerHandle[] = [];
  afterAll(async () => {
    await Promise.all(servers.map((s) => s.stop()));
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  it('refuses a cluster of fewer than 3 servers, and --hosts without --cluster (exit 2, nothing written)', async () => {
    const two = await runCli(['nats', 'init', '--dir', path.join(tmp, 'two'), '--cluster', '2']);
    expect(two.code).toBe(2);
    expect(two.stderr).toMatch(/3 to 5 servers/);
    const hosts = await runCli(['nats', 'init', '--dir', path.join(tmp, 'hosts'), '--hosts', 'a,b,c']);
    expect(hosts.code).toBe(2);
    const mismatch = await runCli(['nats', 'init', '--dir', path.join(tmp, 'mismatch'), '--cluster', '3', '--hosts', 'a,b']);
    expect(mismatch.code).toBe(2);
    expect(mismatch.stderr).toMatch(/one host .* or one per server/);
    for (const d of ['two', 'hosts', 'mismatch']) expect(fs.existsSync(path.join(tmp, d))).toBe(false);
  });

  it('writes one configuration per server for three machines: the same ports, routes to the other hosts', async () => {
    const dir = path.join(tmp, 'three-hosts');
    const r = await runCli(['nats', 'init', '--dir', dir, '--cluster', '3', '--hosts', '10.0.0.1,10.0.0.2,10.0.0.3']);
    expect(r.code, r.stderr).toBe(0);
    const conf2 = fs.readFileSync(path.join(dir, 'nats-2.conf'), 'utf8');
    expect(conf2).toContain('listen: "10.0.0.2:4222"');
    expect(conf2).toContain('listen: "10.0.0.2:6222"');
    expect(conf2).toContain('"nats-route://10.0.0.1:6222"');
    expect(conf2).toContain('"nats-route://10.0.0.3:6222"');
    expect(conf2).not.toContain('nats-route://10.0.0.2');
    expect(r.stdout).toContain('svc serve --nats nats://10.0.0.1:4222,nats://10.0.0.2:4222,nats://10.0.0.3:4222');
  });

  it.skipIf(findNatsServer() === null)(
    'on one machine: three servers that start as a JetStream cluster; svc sets up its layout on it with 3 replicas',
    async () => {
      const dir = path.join(tmp, 'one-machine');
      const port = await freeRun(3);
      const clusterPort = await freeRun(3);
      const r = await runCli([
        'nats',
        'init',
        '--dir',
        dir,
        '--cluster',
        '3',
        '--port',
        String(port),
        '--cluster-port',
        String(clusterPort),
      ]);
      expect(r.code, r.stderr).toBe(0);
      const confs = [1, 2, 3].map((n) => path.join(dir, `nats-${n}.conf`));
      for (const f of [...confs, path.join(dir, 'engine.creds'), path.join(dir, 'worker.creds')]) expect(fs.existsSync(f), f).toBe(true);
      expect(fs.existsSync(path.join(dir, 'nats.conf'))).toBe(false);
      const seeds = [0, 1, 2].map((i) => `nats://127.0.0.1:${port + i}`).join(',');
      expect(r.stdout).toContain(`svc serve --nats ${seeds} --nats-creds ${path.join(dir, 'engine.creds')}`);
      // the same accounts in each: the operator and the preloaded account JWTs are identical
      const tail = (f: string) => fs.readFileSync(f, 'utf8').slice(fs.readFileSync(f, 'utf8').indexOf('operator:'));
      expect(tail(confs[1])).toBe(tail(confs[0]));
      expect(tail(confs[2])).toBe(tail(confs[0]));

      servers.push(...(await Promise.all(confs.map((config) => startNatsServer({ config, timeoutMs: 15_000 })))));
      const nc = await connectNats(seeds, { credsFile: path.join(dir, 'engine.creds'), role: 'engine', name: 'init-test' });
      try {
        expect(nc.info?.cluster).toBe('svc');
        const jsm = await jetstreamManager(nc, { timeout: 3000, checkAPI: false });
        await waitFor(
          () =>
            jsm.getAccountInfo().then(
              () => true,
              () => false,
            ),
          20_000,
          'JetStream to have a meta leader',
        );
        const { replicas } = await ensureLayout(nc, jsm);
        expect(replicas).toBe(3);
        for (const s of LAYOUT_STREAMS) {
          const info = await jsm.streams.info(s);
          expect(info.config.num_replicas, s).toBe(3);
          expect(info.cluster?.name).toBe('svc');
        }
        // each server keeps its JetStream store apart
        for (const n of [1, 2, 3]) expect(fs.existsSync(path.join(dir, `store-${n}`)), `store-${n}`).toBe(true);
      } finally {
        await nc.close();
      }
      // a worker's credentials work on every server
      for (let i = 0; i < 3; i++) {
        const w = await connectNats(`nats://127.0.0.1:${port + i}`, {
          credsFile: path.join(dir, 'worker.creds'),
          role: 'worker',
          name: 'init-test-worker',
        });
        await w.flush();
        await w.close();
      }
    },
    60_000,
  );
});
