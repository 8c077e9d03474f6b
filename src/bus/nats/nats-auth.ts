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
 *
 * Here: the connection options of a role. Its .creds file: nats-creds.ts; its permissions, and
 * `svc nats init` and `svc nats creds`: src/cli/nats-init/ (nats-permissions.ts, nats-setup.ts).
 */
import { credsAuthenticator, type ConnectionOptions } from '@nats-io/transport-node';
import { NatsSetupError, readCredsFile } from './nats-creds.ts';
import { INBOX_PREFIX, producerInboxPrefix, subjectMatches } from '../subjects.ts';

export type NatsRole = 'engine' | 'worker' | 'producer';

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
  if (opts.role === 'producer' && !opts.org)
    throw new NatsSetupError('a producer connection needs its org (its inbox prefix is _INBOX_<org>)');
  const inboxPrefix = opts.role === 'producer' ? producerInboxPrefix(opts.org!) : INBOX_PREFIX[opts.role];
  const options: ConnectionOptions = { servers: opts.servers, name: opts.name, inboxPrefix };
  if (opts.credsFile) {
    const { creds, user } = readCredsFile(opts.credsFile);
    if (user.sub && !user.sub.some((p) => subjectMatches(p, `${inboxPrefix}.x.y`))) {
      throw new NatsSetupError(
        `NATS credentials file ${opts.credsFile} (user ${JSON.stringify(user.name)}) may not subscribe to ${inboxPrefix}.>: ` +
          `not credentials for the ${opts.role}`,
      );
    }
    options.authenticator = credsAuthenticator(creds);
  }
  return options;
}
