/**
 * NATS decentralized authentication for svc (CONTRACT 1 and 6.7): an operator, a system account
 * and one JetStream account `SVC`, whose JWTs are preloaded in nats.conf (`resolver: MEMORY`).
 *
 *   engine    user signed by the account key at `svc nats init`; unrestricted; inbox `_SVC_ENGINE_INBOX`
 *   worker    user signed by the account key at `svc nats init`; least privilege (WORKER_PERMISSIONS);
 *             inbox `_SVC_WORKER_INBOX`
 *   producer  user of one org, signed later by `svc nats creds` with a *scoped* signing key of the
 *             account: the server applies the key's permission template (PRODUCER_TEMPLATE, the
 *             org id being the user's name), so the key kept on disk can mint producers and
 *             nothing else, and a new org's producer needs no server reload.
 *
 * The operator, system-account and account seeds are used once by `svc nats init` and never
 * written: only the producer signing key's seed is kept (`producer-signing.nk`, mode 0600).
 *
 * engine.creds and worker.creds also carry the svc data-plane key (32 random bytes, the same in
 * both) in an extra block after the NATS blocks; NATS clients read the first two blocks only.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import {
  createAccount,
  createOperator,
  createUser,
  decode,
  encodeAccount,
  encodeOperator,
  encodeUser,
  fromSeed,
  newScopedSigner,
  type ClaimsData,
  type KeyPair,
  type OperatorLimits,
  type Permissions,
  type User,
} from '@nats-io/jwt';
import { credsAuthenticator, type ConnectionOptions } from '@nats-io/transport-node';
import { ID_RE } from '../domain/ids.ts';
import { DISPATCH_CONSUMER, EVENTS_STREAM, outcomesWildcard, PROGRESS_BUCKET, REGISTRY_BUCKET } from './jetstream.ts';
import { DATAPLANE_KEY_BYTES } from './seal.ts';
import { INBOX_PREFIX, isValidSubject, producerInboxPrefix, subjectMatches } from './subjects.ts';

export { INBOX_PREFIX };

export type NatsRole = 'engine' | 'worker' | 'producer';


// ---------------------------------------------------------------------------------------------
// Permissions

export interface PermissionLists {
  pub: { allow: string[] };
  sub: { allow: string[] };
}

/**
 * The worker (data plane): exactly what @nats-io/jetstream + @nats-io/kv 3.3.0 publish for its
 * operations on nats-server 2.9 (measured with nats-server tracing; test/bus/nats-auth.test.ts does
 * each operation and fails without any one of these entries):
 *  - events: `js.consumers.get` (CONSUMER.INFO), `fetch`/`next`/`consume` (CONSUMER.MSG.NEXT),
 *    ack/nak/working/term (publish to the message's `$JS.ACK.<stream>.<consumer>.…` reply);
 *  - webhooks (read only): `Kvm.open` (no API call), `kv.status()` (STREAM.INFO: how far the
 *    registry goes, to know when the watch has caught up), `kv.watch` = an ordered push consumer named
 *    `oc_<nuid>_<n>` created with the ≥2.9 API (`CONSUMER.CREATE.<stream>.<name>.<filter>`),
 *    answered flow control (`$JS.FC.<stream>.…`); `kv.get` (STREAM.MSG.GET: a bucket bound by
 *    `open()` does not use direct get);
 *  - progress: get (STREAM.MSG.GET), put/delete (JetStream publish on `$KV.svc_progress.<key>`);
 *  - outcomes: JetStream publish on `svc.outcomes.…`.
 * Every reply comes to `_SVC_WORKER_INBOX.…`, the only thing it may subscribe to.
 * Not granted: deleting any consumer or stream (an ordered consumer that resets asks to delete its
 * previous consumer and ignores the refusal: the server removes it after 5 min of inactivity; one
 * worker cannot take another's watch away), publishing or reading events other than through
 * svc-dispatch, `$JS.API.INFO` (`Kvm.open` and `consumers.get` do not need it; `jetstreamManager()`
 * does), `$JS.API.DIRECT.GET.…` (only if a bucket is opened with `allow_direct: true`), and the
 * 12-token `$JS.ACK.<domain>.<hash>.…` ack subjects (not sent by 2.9 servers).
 */
export function workerPermissions(): PermissionLists {
  const webhooksStream = `KV_${REGISTRY_BUCKET}`;
  const progressStream = `KV_${PROGRESS_BUCKET}`;
  return {
    pub: {
      allow: [
        `$JS.API.CONSUMER.INFO.${EVENTS_STREAM}.${DISPATCH_CONSUMER}`,
        `$JS.API.CONSUMER.MSG.NEXT.${EVENTS_STREAM}.${DISPATCH_CONSUMER}`,
        `$JS.ACK.${EVENTS_STREAM}.${DISPATCH_CONSUMER}.>`,
        `$JS.API.STREAM.INFO.${webhooksStream}`,
        `$JS.API.CONSUMER.CREATE.${webhooksStream}.*.$KV.${REGISTRY_BUCKET}.>`,
        `$JS.FC.${webhooksStream}.>`,
        `$JS.API.STREAM.MSG.GET.${webhooksStream}`,
        `$JS.API.STREAM.MSG.GET.${progressStream}`,
        `$KV.${PROGRESS_BUCKET}.>`,
        outcomesWildcard,
      ],
    },
    sub: { allow: [`${INBOX_PREFIX.worker}.>`] },
  };
}

/**
 * A producer of one org (CONTRACT 6.7): publish `svc.ingest.<org>.>`, subscribe `svc.jobs.<org>.>`
 * and `_INBOX_<org>.>` (replies to its requests, made with that inbox prefix). As a template of the scoped signing key,
 * `{{name()}}` being the user's name, which `svc nats creds` sets to the org id.
 */
export function producerPermissions(org?: string): PermissionLists {
  // nats-server expands a template only as a whole token: the inbox prefix comes from the user's
  // `inbox` tag, which `svc nats creds` sets to `_INBOX_<org>` beside the name
  const name = org ?? '{{name()}}';
  const inbox = org ? producerInboxPrefix(org) : `{{tag(${PRODUCER_INBOX_TAG})}}`;
  return {
    pub: { allow: [`svc.ingest.${name}.>`] },
    sub: { allow: [`svc.jobs.${name}.>`, `${inbox}.>`] },
  };
}

/** The producer user's tag that carries its inbox prefix (`inbox:_INBOX_<org>`). */
const PRODUCER_INBOX_TAG = 'inbox';

/** The engine may do everything (an empty permission list is no restriction). */
export function enginePermissions(): PermissionLists | null {
  return null;
}

/**
 * Whether the engine may answer a request on an ingest subject of `org` on this reply subject.
 * NATS does not check a publisher's reply subject against its permissions: a producer could name
 * `svc.events.…`, another org's job subject or another org's inbox (NUIDs are predictable) as its
 * reply and have the engine publish there. Producers of `org` request with the inbox prefix
 * `_INBOX_<org>` (CONTRACT 5.2), the engine's own local runner on the engine's inbox; answer
 * nothing else.
 */
export function isProducerReplySubject(reply: string | undefined | null, org: string): boolean {
  return (
    typeof reply === 'string' &&
    (reply.startsWith(`${producerInboxPrefix(org)}.`) || reply.startsWith(`${INBOX_PREFIX.engine}.`)) &&
    isValidSubject(reply)
  );
}

// ---------------------------------------------------------------------------------------------
// Files

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

const DATAPLANE_BEGIN = '-----BEGIN SVC DATAPLANE KEY-----';
const DATAPLANE_END = '------END SVC DATAPLANE KEY------';

/** An error about the user's input or files, worded for them (the CLI turns it into exit 2). */
export class NatsSetupError extends Error {
  override readonly name = 'NatsSetupError';
}

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

/** The text of a .creds file (the NATS format), with the data-plane key block after it when given. */
export function renderCreds(jwt: string, seed: string, dataplaneKey?: Buffer | null): string {
  let s = `-----BEGIN NATS USER JWT-----
${jwt}
------END NATS USER JWT------

************************* IMPORTANT *************************
NKEY Seed printed below can be used to sign and prove identity.
NKEYs are sensitive and should be treated as secrets.

-----BEGIN USER NKEY SEED-----
${seed}
------END USER NKEY SEED------

*************************************************************
`;
  if (dataplaneKey) {
    if (dataplaneKey.length !== DATAPLANE_KEY_BYTES) throw new Error('the data-plane key must be 32 bytes');
    s += `
The svc data-plane key below is a secret shared by the engine and the workers.

${DATAPLANE_BEGIN}
${dataplaneKey.toString('base64')}
${DATAPLANE_END}
`;
  }
  return s;
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

// ---------------------------------------------------------------------------------------------
// Reading credentials

/** The expression nats.js 3.3.0 `credsAuthenticator` parses a .creds file with: first match JWT, second seed. */
const NATS_JS_CREDS_RE = /\s*(?:(?:[-]{3,}[^\n]*[-]{3,}\n)(.+)(?:\n\s*[-]{3,}[^\n]*[-]{3,}\n))/gi;

export interface CredsFile {
  /** The NATS part only (user JWT and seed), for nats.js `credsAuthenticator`. */
  creds: Uint8Array;
  /** The svc data-plane key (32 bytes) when the file carries one (engine.creds, worker.creds). */
  dataplaneKey: Buffer | null;
  /** The user's claims (public): name, permissions. */
  user: { name: string; pub: string[] | null; sub: string[] | null };
}

/**
 * Reads and checks a .creds file. Errors name the file and the problem, never its content.
 */
export function readCredsFile(path: string): CredsFile {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw new NatsSetupError(`NATS credentials file ${path} does not exist`);
    if (code === 'EACCES' || code === 'EPERM') throw new NatsSetupError(`NATS credentials file ${path} is not readable (permission denied)`);
    if (code === 'EISDIR') throw new NatsSetupError(`NATS credentials file ${path} is a directory`);
    throw new NatsSetupError(`cannot read NATS credentials file ${path} (${code ?? 'error'})`, { cause: err });
  }
  const invalid = (what: string) => new NatsSetupError(`NATS credentials file ${path} is not valid: ${what}`);
  const blocks = new Map<string, string>();
  for (const m of text.matchAll(/-{3,}BEGIN ([A-Z ]+?)-{3,}\r?\n\s*(\S+)\s*\r?\n\s*-{3,}END \1-{3,}/g)) {
    if (!blocks.has(m[1])) blocks.set(m[1], m[2]);
  }
  const jwt = blocks.get('NATS USER JWT');
  const seed = blocks.get('USER NKEY SEED');
  if (!jwt) throw invalid('no user JWT block');
  if (!seed) throw invalid('no user seed block');
  // The NATS clients take the first two blocks, whatever their names: make sure those are ours.
  const order = [...text.matchAll(NATS_JS_CREDS_RE)].slice(0, 2).map((m) => m[1].trim());
  if (order[0] !== jwt || order[1] !== seed) throw invalid('the user JWT and seed must be its first two blocks');
  let claims: ClaimsData<User>;
  try {
    claims = decode<User>(jwt);
  } catch {
    throw invalid('the user JWT does not decode or its signature does not verify');
  }
  if (claims.nats?.type !== 'user') throw invalid('the JWT is not a user JWT');
  let publicKey: string;
  try {
    const kp = fromSeed(new TextEncoder().encode(seed));
    publicKey = kp.getPublicKey();
    kp.clear();
  } catch {
    throw invalid('the seed is not a NATS user seed');
  }
  if (publicKey !== claims.sub) throw invalid('the seed does not belong to the user JWT');
  let dataplaneKey: Buffer | null = null;
  if (text.includes(DATAPLANE_BEGIN)) {
    const b64 = blocks.get('SVC DATAPLANE KEY');
    const key = b64 && /^[A-Za-z0-9+/]+={0,2}$/.test(b64) ? Buffer.from(b64, 'base64') : null;
    if (!key || key.length !== DATAPLANE_KEY_BYTES) throw invalid('the svc data-plane key block is not 32 bytes of base64');
    dataplaneKey = key;
  }
  const list = (l: string[] | undefined) => (l && l.length > 0 ? [...l] : null);
  return {
    creds: new TextEncoder().encode(renderCreds(jwt, seed)),
    dataplaneKey,
    user: { name: claims.name, pub: list(claims.nats.pub?.allow), sub: list(claims.nats.sub?.allow) },
  };
}

// ---------------------------------------------------------------------------------------------
// Connecting

/**
 * nats.js connection options for an svc role: the credentials (when given) and the role's inbox
 * prefix, which nats.js 3.3.0 uses for request() and for every JetStream/KV reply and delivery
 * subject (JetStream takes it as its default `watcherPrefix`). Fails early, with a clear message,
 * when the credentials cannot receive replies on the role's inbox (e.g. worker creds for the engine).
 */
export function natsConnectOptions(opts: {
  servers: string[];
  name: string;
  credsFile?: string | null;
  role: NatsRole;
  /** the producer's org (role producer): its inbox prefix is `_INBOX_<org>` */
  org?: string;
}): ConnectionOptions {
  if (opts.role === 'producer' && !opts.org) throw new NatsSetupError('a producer connection needs its org (its inbox prefix is _INBOX_<org>)');
  const inboxPrefix = opts.role === 'producer' ? producerInboxPrefix(opts.org!) : INBOX_PREFIX[opts.role];
  const options: ConnectionOptions = { servers: opts.servers, name: opts.name, inboxPrefix };
  if (opts.credsFile) {
    const { creds, user } = readCredsFile(opts.credsFile);
    if (user.sub && !user.sub.some((p) => subjectMatches(p, `${inboxPrefix}.x.y`))) {
      throw new NatsSetupError(
        `NATS credentials file ${opts.credsFile} (user ${JSON.stringify(user.name)}) may not subscribe to ${inboxPrefix}.>: not credentials for the ${opts.role}`,
      );
    }
    options.authenticator = credsAuthenticator(creds);
  }
  return options;
}
