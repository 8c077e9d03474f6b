/**
 * A private 3-server nats-server cluster for a test file: routes between them on free ports,
 * JetStream with a store dir each under one temp dir, ready once JetStream has a meta leader.
 * Never the system server on 4222.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { freePort, startNatsServer, type NatsServerHandle } from './nats-server.ts';
import { waitFor } from './wait.ts';

export interface ClusterServer {
  /** server_name: what a stream's cluster.leader names */
  name: string;
  port: number;
  url: string;
  storeDir: string;
  /** null while stopped or killed */
  handle: NatsServerHandle | null;
}

export interface NatsClusterHandle {
  servers: ClusterServer[];
  /** every server's URL, comma-separated: a seed list */
  urls: string;
  server(name: string): ClusterServer;
  /** kill -9 one server; with wipe, its store dir goes with it (a lost disk) */
  kill(name: string, opts?: { wipe?: boolean }): Promise<void>;
  /** start a stopped or killed server again, on its port and store dir */
  restart(name: string): Promise<void>;
  stop(): Promise<void>;
}

function serverConf(s: { name: string; port: number; clusterPort: number; storeDir: string }, routes: number[]): string {
  return [
    `server_name: ${s.name}`,
    `listen: "127.0.0.1:${s.port}"`,
    `jetstream { store_dir: ${JSON.stringify(s.storeDir)} }`,
    'cluster {',
    '  name: svc-test',
    `  listen: "127.0.0.1:${s.clusterPort}"`,
    `  routes: [${routes.map((p) => `"nats-route://127.0.0.1:${p}"`).join(', ')}]`,
    '}',
    '',
  ].join('\n');
}

/** Resolves once JetStream answers through `url` (it has a meta leader: before that its API is unavailable). */
export async function waitForJetStream(url: string, timeoutMs = 20_000): Promise<void> {
  const nc = await connect({ servers: url.split(','), timeout: 2000 });
  try {
    const jsm = await jetstreamManager(nc, { timeout: 2000, checkAPI: false });
    await waitFor(
      () =>
        jsm.getAccountInfo().then(
          () => true,
          () => false,
        ),
      timeoutMs,
      'JetStream to have a meta leader',
    );
  } finally {
    await nc.close();
  }
}

/** Three nats-servers routed to each other; resolves once JetStream answers on every one of them. */
export async function startNatsCluster(): Promise<NatsClusterHandle> {
  const root = mkdtempSync(join(tmpdir(), 'svc-nats-cluster-'));
  const specs: Array<{ name: string; port: number; clusterPort: number; storeDir: string; conf: string }> = [];
  for (let i = 1; i <= 3; i++) {
    specs.push({
      name: `n${i}`,
      port: await freePort(),
      clusterPort: await freePort(),
      storeDir: join(root, `n${i}`),
      conf: join(root, `n${i}.conf`),
    });
  }
  for (const s of specs)
    writeFileSync(
      s.conf,
      serverConf(
        s,
        specs.filter((o) => o !== s).map((o) => o.clusterPort),
      ),
    );
  const servers: ClusterServer[] = specs.map((s) => ({
    name: s.name,
    port: s.port,
    url: `nats://127.0.0.1:${s.port}`,
    storeDir: s.storeDir,
    handle: null,
  }));
  const confOf = (name: string) => specs.find((s) => s.name === name)!.conf;
  const server = (name: string) => {
    const s = servers.find((x) => x.name === name);
    if (!s) throw new Error(`no server ${name} in the cluster`);
    return s;
  };
  const start = async (s: ClusterServer) => {
    s.handle = await startNatsServer({ config: confOf(s.name), timeoutMs: 15_000 });
  };
  const handle: NatsClusterHandle = {
    servers,
    urls: servers.map((s) => s.url).join(','),
    server,
    async kill(name, opts = {}) {
      const s = server(name);
      await s.handle?.kill();
      s.handle = null;
      if (opts.wipe) rmSync(s.storeDir, { recursive: true, force: true });
    },
    async restart(name) {
      const s = server(name);
      if (s.handle) return;
      await start(s);
    },
    async stop() {
      await Promise.all(servers.map((s) => s.handle?.stop()));
      for (const s of servers) s.handle = null;
      rmSync(root, { recursive: true, force: true });
    },
  };
  try {
    await Promise.all(servers.map(start));
    for (const s of servers) await waitForJetStream(s.url);
  } catch (err) {
    await handle.stop();
    throw err;
  }
  return handle;
}
