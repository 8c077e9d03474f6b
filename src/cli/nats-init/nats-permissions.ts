// What each svc role may publish and subscribe to on NATS (CONTRACT 6.7): the worker's least
// privilege, a producer's org-scoped template, the unrestricted engine (the one check NATS cannot
// make for the engine, a producer's reply subject, is src/bus/subjects.ts isProducerReplySubject).
// src/bus/nats/nats-auth.ts tells the design.
import { DISPATCH_CONSUMER, EVENTS_STREAM, PROGRESS_BUCKET, REGISTRY_BUCKET } from '../../bus/nats/jetstream.ts';
import { INBOX_PREFIX, outcomesWildcard, producerInboxPrefix } from '../../bus/subjects.ts';

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
export const PRODUCER_INBOX_TAG = 'inbox';

/** The engine may do everything (an empty permission list is no restriction). */
export function enginePermissions(): PermissionLists | null {
  return null;
}
