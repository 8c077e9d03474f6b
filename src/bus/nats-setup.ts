// `svc nats init` and `svc nats creds`: the operator, accounts and users of an svc NATS setup,
// written into one directory (nats.conf, engine.creds, worker.creds, the producers' scoped signing
// key, svc-nats.json). src/bus/nats-auth.ts tells the design.
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { createAccount, createOperator, createUser, encodeAccount, encodeOperator, encodeUser, fromSeed, newScopedSigner, type KeyPair, type OperatorLimits, type Permissions, type User } from '@nats-io/jwt';
import { ID_RE } from '../domain/ids.ts';
import { NatsSetupError, renderCreds } from './nats-creds.ts';
import { enginePermissions, producerPermissions, PRODUCER_INBOX_TAG, workerPermissions, type PermissionLists } from './nats-permissions.ts';
import { DATAPLANE_KEY_BYTES } from './seal.ts';
import { producerInboxPrefix } from './subjects.ts';

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
  return { pub: { allow: p.pub.allow, deny: [] }, sub: { allow: p.sub.allow, deny: [] } } satisfies Permissions;
}

/** nats.conf for the trusted operator, with the accounts preloaded in a MEMORY resolver. */
export function renderNatsConf(opts: {
  port: number;
  storeDir: string;
  operatorJwt: string;
  systemAccount: string;
  accounts: Record<string, string>;
}): string {
  const q = (s: string) => JSON.stringify(s);
  const preload = Object.entries(opts.accounts)
    .map(([id, jwt]) => `  ${id}: ${q(jwt)}`)
    .join('\n');
  return `# nats-server configuration written by \`svc nats init\`.
# Start: nats-server -c <this file>
# Every client must present credentials (engine.creds, worker.creds, or a producer's from
# \`svc nats creds\`); there is no anonymous user.

listen: ${q(`127.0.0.1:${opts.port}`)}

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
}

/**
 * `svc nats init`: writes nats.conf, engine.creds, worker.creds, producer-signing.nk and
 * svc-nats.json into `dir` (created 0700 if missing). Refuses a directory that already holds any of
 * them: re-running init would mint new keys and silently invalidate every credential handed out.
 */
export async function initNatsDir(opts: { dir: string; port?: number }): Promise<NatsInitResult> {
  const port = opts.port ?? 4222;
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new NatsSetupError(`invalid port ${port}: 1..65535`);
  const dir = resolve(opts.dir);
  const files = {
    conf: join(dir, NATS_FILES.conf),
    engineCreds: join(dir, NATS_FILES.engineCreds),
    workerCreds: join(dir, NATS_FILES.workerCreds),
    producerSigningKey: join(dir, NATS_FILES.producerSigningKey),
    meta: join(dir, NATS_FILES.meta),
  };
  const present = Object.values(files).filter((f) => existsSync(f));
  if (present.length > 0) {
    throw new NatsSetupError(
      `${dir} already holds a NATS setup (${present.map((f) => f.slice(dir.length + 1)).join(', ')}); ` +
        'init never overwrites keys: use another directory, or remove these files to start over (every credential issued from them stops working)',
    );
  }
  const storeDir = join(dir, NATS_FILES.store);

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
  const conf = renderNatsConf({
    port,
    storeDir,
    operatorJwt,
    systemAccount: system.getPublicKey(),
    accounts: { [system.getPublicKey()]: systemJwt, [account.getPublicKey()]: accountJwt },
  });
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
  write(files.conf, conf, 0o644);
  return { dir, port, files, storeDir };
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
  const jwt = await encodeUser(orgId, user, meta.account, { tags: [`${PRODUCER_INBOX_TAG}:${producerInboxPrefix(orgId)}`] }, { signer, scopedUser: true });
  const creds = renderCreds(jwt, new TextDecoder().decode(user.getSeed()));
  signer.clear();
  user.clear();
  return creds;
}
