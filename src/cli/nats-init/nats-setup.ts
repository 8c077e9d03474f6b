// `svc nats init` and `svc nats creds`: the operator, accounts and users of an svc NATS setup,
// written into one directory (nats.conf, engine.creds, worker.creds, the producers' scoped signing
// key, svc-nats.json). src/bus/nats/nats-auth.ts tells the design.
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import {
  createAccount,
  createOperator,
  createUser,
  encodeAccount,
  encodeOperator,
  encodeUser,
  fromSeed,
  newScopedSigner,
  type KeyPair,
  type OperatorLimits,
  type Permissions,
  type User,
} from '@nats-io/jwt';
import { ID_RE } from '../../domain/ids.ts';
import { NatsSetupError, renderCreds } from '../../bus/nats/nats-creds.ts';
import { enginePermissions, producerPermissions, PRODUCER_INBOX_TAG, workerPermissions, type PermissionLists } from './nats-permissions.ts';
import { DATAPLANE_KEY_BYTES } from '../../bus/seal.ts';
import { producerInboxPrefix } from '../../bus/subjects.ts';

export const NATS_FILES = {
  conf: 'nats.conf',
  engineCreds: 'engine.creds',
  workerCreds: 'worker.creds',
  /** Seed of the account's scoped signing key for producers (secret, 0600). */
  producerSigningKey: 'producer-signing.nk',
  /** Public facts `svc nats creds` needs (account id); no secret. */
  meta: 'svc-nats.json',
  /** JetStream store (nats-server adds `jetstream/` below it). */
  store: 'store',
} as const;

interface NatsMeta {
  version: 1;
  operator: string;
  system_account: string;
  account: string;
  producer_signing_key: string;
  port: number;
}

const UNLIMITED: OperatorLimits = {
  subs: -1,
  data: -1,
  payload: -1,
  imports: -1,
  exports: -1,
  wildcards: true,
  conn: -1,
  leaf: -1,
};
const UNLIMITED_JETSTREAM: OperatorLimits = {
  mem_storage: -1,
  disk_storage: -1,
  streams: -1,
  consumer: -1,
  max_ack_pending: -1,
  mem_max_stream_bytes: -1,
  disk_max_stream_bytes: -1,
};

function toJwtPermissions(p: PermissionLists): Partial<User> {
  return {
    pub: { allow: p.pub.allow, deny: [] },
    sub: { allow: p.sub.allow, deny: [] },
    // the JWT's ttl is a Go duration: nanoseconds
    ...(p.resp ? { resp: { max: p.resp.max, ttl: p.resp.ttlMs * 1e6 } } : {}),
  } satisfies Permissions;
}

/** One server of a cluster: its name, where it listens for routes, and the routes to the others. */
export interface ClusterServerConf {
  /** server_name (JetStream in a cluster needs one per server) */
  name: string;
  /** the cluster's name, the same on every server */
  cluster: string;
  /** host:port this server listens on for routes */
  listen: string;
  /** nats-route://host:port of every other server */
  routes: string[];
}

/** nats.conf for the trusted operator, with the accounts preloaded in a MEMORY resolver; with `cluster`, one server of a cluster. */
export function renderNatsConf(opts: {
  port: number;
  /** where clients connect (default 127.0.0.1) */
  host?: string;
  storeDir: string;
  operatorJwt: string;
  systemAccount: string;
  accounts: Record<string, string>;
  cluster?: ClusterServerConf;
}): string {
  const q = (s: string) => JSON.stringify(s);
  const preload = Object.entries(opts.accounts)
    .map(([id, jwt]) => `  ${id}: ${q(jwt)}`)
    .join('\n');
  const c = opts.cluster;
  const clusterBlock = c
    ? `
server_name: ${q(c.name)}

# routes to the other servers; JetStream keeps each stream on as many of them as it has replicas
cluster {
  name: ${q(c.cluster)}
  listen: ${q(c.listen)}
  routes: [
${c.routes.map((r) => `    ${q(r)}`).join('\n')}
  ]
}
`
    : '';
  return `# nats-server configuration written by \`svc nats init\`.
# Start: nats-server -c <this file>
# Every client must present credentials (engine.creds, worker.creds, or a producer's from
# \`svc nats creds\`); there is no anonymous user.

listen: ${q(`${opts.host ?? '127.0.0.1'}:${opts.port}`)}
${clusterBlock}
jetstream {
  store_dir: ${q(opts.storeDir)}
}

operator: ${q(opts.operatorJwt)}
system_account: ${opts.systemAccount}

resolver: MEMORY
resolver_preload: {
${preload}
}
`;
}

async function userCreds(name: string, account: KeyPair, perms: PermissionLists | null, dataplaneKey: Buffer): Promise<string> {
  const user = createUser();
  const jwt = await encodeUser(name, user, account, perms ? toJwtPermissions(perms) : {});
  return renderCreds(jwt, new TextDecoder().decode(user.getSeed()), dataplaneKey);
}

export interface NatsInitResult {
  dir: string;
  port: number;
  files: { conf: string; engineCreds: string; workerCreds: string; producerSigningKey: string; meta: string };
  storeDir: string;
  /** with --cluster: each server's configuration, client URL and store (files.conf is the first's) */
  servers: Array<{ name: string; conf: string; url: string; storeDir: string }>;
}

/** `svc nats init --cluster N`: how many servers, where, on which ports. */
export interface ClusterInit {
  size: number;
  /** one host per server (three machines), or one for all (one machine: ports port, port+1, …); default 127.0.0.1 */
  hosts?: string[];
  /** the first route port (default 6222); on one machine each server takes the next */
  clusterPort?: number;
}

const DEFAULT_CLUSTER_PORT = 6222;

/** The servers of a cluster init: names, hosts, client and route ports (one machine: consecutive ports). */
function clusterLayout(port: number, c: ClusterInit): Array<{ name: string; host: string; port: number; clusterPort: number }> {
  if (!Number.isInteger(c.size) || c.size < 3 || c.size > 5)
    throw new NatsSetupError(`invalid cluster size ${c.size}: 3 to 5 servers (JetStream needs a majority of them up)`);
  const hosts = c.hosts?.length ? c.hosts : ['127.0.0.1'];
  if (hosts.length !== 1 && hosts.length !== c.size)
    throw new NatsSetupError(`--hosts names ${hosts.length} hosts for ${c.size} servers: one host (all on one machine) or one per server`);
  for (const h of hosts) if (!/^[A-Za-z0-9.\-:[\]]+$/.test(h)) throw new NatsSetupError(`invalid host ${JSON.stringify(h)}`);
  const oneMachine = hosts.length === 1;
  const clusterPort = c.clusterPort ?? DEFAULT_CLUSTER_PORT;
  const last = Math.max(port, clusterPort) + (oneMachine ? c.size - 1 : 0);
  if (!Number.isInteger(clusterPort) || clusterPort < 1 || last > 65535)
    throw new NatsSetupError(`invalid ports ${port} and ${clusterPort}: the ports of every server must be 1..65535`);
  const servers = Array.from({ length: c.size }, (_, i) => ({
    name: `svc-${i + 1}`,
    host: oneMachine ? hosts[0] : hosts[i],
    port: oneMachine ? port + i : port,
    clusterPort: oneMachine ? clusterPort + i : clusterPort,
  }));
  const taken = new Set<string>();
  for (const s of servers) {
    for (const p of [s.port, s.clusterPort]) {
      const key = `${s.host}:${p}`;
      if (taken.has(key))
        throw new NatsSetupError(`the client and route ports overlap (${key}): pick --port and --cluster-port further apart`);
      taken.add(key);
    }
  }
  return servers;
}

/**
 * `svc nats init`: writes nats.conf, engine.creds, worker.creds, producer-signing.nk and
 * svc-nats.json into `dir` (created 0700 if missing). Refuses a directory that already holds any of
 * them: re-running init would mint new keys and silently invalidate every credential handed out.
 */
export async function initNatsDir(opts: { dir: string; port?: number; cluster?: ClusterInit }): Promise<NatsInitResult> {
  const port = opts.port ?? 4222;
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new NatsSetupError(`invalid port ${port}: 1..65535`);
  const layout = opts.cluster ? clusterLayout(port, opts.cluster) : null;
  const dir = resolve(opts.dir);
  const confs = layout ? layout.map((_, i) => join(dir, clusterConfName(i + 1))) : [join(dir, NATS_FILES.conf)];
  const files = {
    conf: confs[0],
    engineCreds: join(dir, NATS_FILES.engineCreds),
    workerCreds: join(dir, NATS_FILES.workerCreds),
    producerSigningKey: join(dir, NATS_FILES.producerSigningKey),
    meta: join(dir, NATS_FILES.meta),
  };
  const present = [...new Set([...Object.values(files), ...confs])].filter((f) => existsSync(f));
  if (present.length > 0) {
    throw new NatsSetupError(
      `${dir} already holds a NATS setup (${present.map((f) => f.slice(dir.length + 1)).join(', ')}); ` +
        'init never overwrites keys: use another directory, or remove these files to start over ' +
        '(every credential issued from them stops working)',
    );
  }
  const storeDir = join(dir, NATS_FILES.store);
  // on one machine each server has a store of its own; on several, the same path on each
  const storeOf = (i: number) =>
    layout?.length && new Set(layout.map((s) => s.host)).size === 1 ? join(dir, `${NATS_FILES.store}-${i + 1}`) : storeDir;

  const operator = createOperator();
  const system = createAccount();
  const account = createAccount();
  const producerSigner = createAccount();

  const operatorJwt = await encodeOperator('svc', operator, { system_account: system.getPublicKey() });
  const systemJwt = await encodeAccount('SYS', system, { limits: UNLIMITED }, { signer: operator });
  const accountJwt = await encodeAccount(
    'SVC',
    account,
    {
      limits: { ...UNLIMITED, ...UNLIMITED_JETSTREAM },
      signing_keys: [newScopedSigner(producerSigner, 'producer', toJwtPermissions(producerPermissions()))],
    },
    { signer: operator },
  );

  const dataplaneKey = randomBytes(DATAPLANE_KEY_BYTES);
  const engineCreds = await userCreds('svc-engine', account, enginePermissions(), dataplaneKey);
  const workerCreds = await userCreds('svc-worker', account, workerPermissions(), dataplaneKey);
  const meta: NatsMeta = {
    version: 1,
    operator: operator.getPublicKey(),
    system_account: system.getPublicKey(),
    account: account.getPublicKey(),
    producer_signing_key: producerSigner.getPublicKey(),
    port,
  };
  const accounts = { [system.getPublicKey()]: systemJwt, [account.getPublicKey()]: accountJwt };
  const rendered = (layout ?? [null]).map((srv, i) =>
    renderNatsConf({
      port: srv?.port ?? port,
      host: srv?.host,
      storeDir: storeOf(i),
      operatorJwt,
      systemAccount: system.getPublicKey(),
      accounts,
      cluster: srv
        ? {
            name: srv.name,
            cluster: 'svc',
            listen: `${srv.host}:${srv.clusterPort}`,
            routes: layout!.filter((o) => o !== srv).map((o) => `nats-route://${o.host}:${o.clusterPort}`),
          }
        : undefined,
    }),
  );
  const servers = (layout ?? []).map((srv, i) => ({
    name: srv.name,
    conf: confs[i],
    url: `nats://${srv.host}:${srv.port}`,
    storeDir: storeOf(i),
  }));
  const signerSeed = `${new TextDecoder().decode(producerSigner.getSeed())}\n`;
  for (const kp of [operator, system, account, producerSigner]) kp.clear();

  const write = (file: string, text: string, mode: number) => {
    try {
      // 'wx': never overwrite (a concurrent init fails instead of mixing keys).
      writeFileSync(file, text, { flag: 'wx', mode });
    } catch (err) {
      throw new NatsSetupError(`cannot write ${file}: ${(err as NodeJS.ErrnoException).code ?? 'error'}`, { cause: err });
    }
  };
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    if (!statSync(dir).isDirectory()) throw Object.assign(new Error(), { code: 'ENOTDIR' });
  } catch (err) {
    throw new NatsSetupError(`cannot use ${dir} as a directory: ${(err as NodeJS.ErrnoException).code ?? 'error'}`, { cause: err });
  }
  write(files.producerSigningKey, signerSeed, 0o600);
  write(files.meta, `${JSON.stringify(meta, null, 2)}\n`, 0o644);
  write(files.engineCreds, engineCreds, 0o600);
  write(files.workerCreds, workerCreds, 0o600);
  rendered.forEach((conf, i) => write(confs[i], conf, 0o644));
  return { dir, port, files, storeDir: layout ? storeOf(0) : storeDir, servers };
}

/** The configuration of server `n` (from 1) of a cluster init. */
export function clusterConfName(n: number): string {
  return `nats-${n}.conf`;
}

function readSetupFile(dir: string, name: string): string {
  if (!existsSync(dir)) throw new NatsSetupError(`${dir} does not exist: run \`svc nats init --dir ${dir}\` first`);
  const file = join(dir, name);
  try {
    return readFileSync(file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') {
      throw new NatsSetupError(`${dir} is not a directory made by \`svc nats init\` (no ${name})`);
    }
    throw new NatsSetupError(`cannot read ${file}: ${code ?? 'error'}`, { cause: err });
  }
}

/**
 * `svc nats creds`: the .creds of a producer of `orgId` (no data-plane key), signed with the
 * scoped producer key kept in `dir`. Valid at once on a running server: no reload.
 */
export async function producerCreds(dir: string, orgId: string): Promise<string> {
  if (typeof orgId !== 'string' || !ID_RE.test(orgId)) {
    throw new NatsSetupError('invalid org id: 1..64 characters of a-z, 0-9 and _');
  }
  const abs = resolve(dir);
  let meta: NatsMeta;
  try {
    meta = JSON.parse(readSetupFile(abs, NATS_FILES.meta)) as NatsMeta;
  } catch (err) {
    if (err instanceof NatsSetupError) throw err;
    throw new NatsSetupError(`${join(abs, NATS_FILES.meta)} is not valid JSON`, { cause: err });
  }
  if (meta?.version !== 1 || typeof meta.account !== 'string' || !meta.account.startsWith('A')) {
    throw new NatsSetupError(`${join(abs, NATS_FILES.meta)} is not an svc NATS setup (version 1)`);
  }
  let signer: KeyPair;
  try {
    signer = fromSeed(new TextEncoder().encode(readSetupFile(abs, NATS_FILES.producerSigningKey).trim()));
    if (meta.producer_signing_key && signer.getPublicKey() !== meta.producer_signing_key) throw new Error('mismatch');
  } catch (err) {
    if (err instanceof NatsSetupError) throw err;
    throw new NatsSetupError(`${join(abs, NATS_FILES.producerSigningKey)} does not hold this setup's producer signing key`, { cause: err });
  }
  const user = createUser();
  // Scoped: the permissions are the signing key's template; the user's name is the org id, its
  // `inbox` tag the org's reply inbox prefix.
  const jwt = await encodeUser(
    orgId,
    user,
    meta.account,
    { tags: [`${PRODUCER_INBOX_TAG}:${producerInboxPrefix(orgId)}`] },
    { signer, scopedUser: true },
  );
  const creds = renderCreds(jwt, new TextDecoder().decode(user.getSeed()));
  signer.clear();
  user.clear();
  return creds;
}
