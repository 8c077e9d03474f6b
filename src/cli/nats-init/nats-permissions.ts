// What each svc role may publish and subscribe to on NATS (CONTRACT 6.7): the worker's least
// privilege, a producer's org-scoped template, the unrestricted engine (the one check NATS cannot
// make for the engine, a producer's reply subject, is src/bus/subjects.ts isProducerReplySubject).
// src/bus/nats/nats-auth.ts tells the design.
import { DISPATCH_CONSUMER, EVENTS_STREAM, ORGS_BUCKET, PROGRESS_BUCKET, REGISTRY_BUCKET } from '../../bus/nats/jetstream.ts';
import {
  factsWildcard,
  INBOX_PREFIX,
  INGEST_QUEUE_GROUP,
  ingestWildcard,
  outcomesWildcard,
  producerInboxPrefix,
} from '../../bus/subjects.ts';

export interface PermissionLists {
  pub: { allow: string[] };
  /** an entry `<subject> <queue>` allows subscribing to the subject in that queue group only */
  sub: { allow: string[] };
  /**
   * NATS response permissions (the JWT's `resp`): after receiving a message with a reply subject,
   * the user may publish `max` messages to that reply subject within `ttlMs`, whatever `pub` says.
   */
  resp?: { max: number; ttlMs: number };
}

/**
 * How long after a producer's request its answer may be sent (the worker's response permission):
 * well beyond what a gate takes (a JetStream publish times out after 10 s) and a producer waits.
 */
export const INGEST_ANSWER_TTL_MS = 60_000;

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
 *  - outcomes: JetStream publish on `svc.outcomes.…`;
 *  - the ingest gate (CONTRACT 9 "Durable ingest"): subscribe `svc.ingest.>` in the queue group
 *    `svc-ingest` only (a plain subscription, which would see every org's requests, is refused);
 *    store facts with a JetStream publish on `svc.facts.…` (its PubAck comes to the worker inbox);
 *    answer the producer on the request's reply subject (`_INBOX_<org>.…`, which no pattern can
 *    name: NATS's response permission, one answer per request received, within
 *    INGEST_ANSWER_TTL_MS). The response permission lets the worker answer on *any* reply subject
 *    a request names, and a producer names its own: the gate answers only
 *    isProducerReplySubject() replies (src/bus/subjects.ts), as the engine does;
 *  - the org directory (read only): `kv.status()` and `kv.watch` of svc_orgs, as for webhooks.
 * (The two `$JS.FC` entries are needed only when the server asks the watcher for flow control:
 * the test puts 4 MiB ahead of the watch for that, and a 2.9.10 server on a fast machine may still
 * not ask; kept for large registries and directories.)
 * Every reply comes to `_SVC_WORKER_INBOX.…`, the only inbox it may subscribe to.
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
  const orgsStream = `KV_${ORGS_BUCKET}`;
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
        factsWildcard,
        `$JS.API.STREAM.INFO.${orgsStream}`,
        `$JS.API.CONSUMER.CREATE.${orgsStream}.*.$KV.${ORGS_BUCKET}.>`,
        `$JS.FC.${orgsStream}.>`,
      ],
    },
    sub: { allow: [`${INBOX_PREFIX.worker}.>`, `${ingestWildcard} ${INGEST_QUEUE_GROUP}`] },
    resp: { max: 1, ttlMs: INGEST_ANSWER_TTL_MS },
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
export const PRODUCER_INBOX_TAG = 'inbox';

/** The engine may do everything (an empty permission list is no restriction). */
export function enginePermissions(): PermissionLists | null {
  return null;
}
