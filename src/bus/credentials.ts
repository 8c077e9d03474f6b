// NATS credentials of an svc process (CONTRACT 1 --nats-creds, 6.7): the connection options of a
// role, and the data plane key that `svc nats init` writes into the engine's and workers' creds.
import fs from 'node:fs';
import { credsAuthenticator, type ConnectionOptions } from '@nats-io/transport-node';

export type NatsRole = 'engine' | 'worker';

/** Inbox prefixes of svc's own roles, so that producers (allowed `_INBOX.>`) never see their replies. */
export const INBOX_PREFIX: Record<NatsRole, string> = { engine: '_SVC_ENGINE_INBOX', worker: '_SVC_WORKER_INBOX' };

const KEY_BLOCK = /-----BEGIN SVC DATAPLANE KEY-----\s*([A-Za-z0-9+/=\s]+?)\s*-+END SVC DATAPLANE KEY-+/;

function readCreds(file: string): string {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch (err) {
    throw new Error(`cannot read the NATS credentials file ${file}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
  }
}

/** Connection options of a role (none without a credentials file). */
export function natsConnection(credsFile: string | null, role: NatsRole): Partial<ConnectionOptions> {
  if (!credsFile) return {};
  const text = readCreds(credsFile);
  return { authenticator: credsAuthenticator(new TextEncoder().encode(text)), inboxPrefix: INBOX_PREFIX[role] };
}

/** The data plane key a credentials file carries (base64 text), or null. */
export function dataplaneKeyOf(credsFile: string): string | null {
  const m = KEY_BLOCK.exec(readCreds(credsFile));
  return m ? m[1].replace(/\s+/g, '') : null;
}
