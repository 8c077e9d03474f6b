// The .creds file of an svc NATS user: written (the NATS format, with the svc data-plane key in a
// block of its own after the NATS blocks for the engine and workers) and read back, checked.
import { readFileSync } from 'node:fs';
import { decode, fromSeed, type ClaimsData, type User } from '@nats-io/jwt';
import { DATAPLANE_KEY_BYTES } from '../seal.ts';

const DATAPLANE_BEGIN = '-----BEGIN SVC DATAPLANE KEY-----';
const DATAPLANE_END = '------END SVC DATAPLANE KEY------';

/** An error about the user's input or files, worded for them (the CLI turns it into exit 2). */
export class NatsSetupError extends Error {
  override readonly name = 'NatsSetupError';
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
    if (code === 'EACCES' || code === 'EPERM')
      throw new NatsSetupError(`NATS credentials file ${path} is not readable (permission denied)`);
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
