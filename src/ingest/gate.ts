// The ingest gate (CONTRACT 9 "Durable ingest", NATS mode): every svc process connected to NATS
// (svc serve, svc worker) answers producers' requests on svc.ingest.> in one queue group. It checks
// what it can alone (the subject, the schema, that the org exists, the org's rate), stores the fact
// in SVC_FACTS and answers once the stream holds it, so a producer is answered while no engine runs.
// The engine applies the stream (src/ingest/fact-stream.ts) and sends its verdict on each fact back
// to the gate that stored it; a gate that gets it within VERDICT_WAIT_MS of the request answers with
// it (a refusal only the engine can judge, a warning, as before the stream), else `{"ok": true}`:
// the fact is stored, and the engine's refusal, if any, shows later at GET /v1/ingest/rejections.
import { headers as natsHeaders, type Msg, type NatsConnection, type Subscription } from '@nats-io/transport-node';
import type { Logger } from 'pino';
import { JetStreamPublisher, NotStoredError } from '../bus/nats/jetstream-publisher.ts';
import { factSubject, ingestWildcard, isProducerReplySubject, parseIngestSubject } from '../bus/subjects.ts';
import { sleep, within, type Clock, type Timer } from '../domain/clock.ts';
import { errorText } from '../domain/errors.ts';
import { Fifo } from '../domain/fifo.ts';
import { FairQueue } from '../domain/fair-queue.ts';
import { RepeatedWarnings } from '../log-summary.ts';
import type { Metrics } from '../metrics.ts';
import type { Readiness } from '../readiness.ts';
import { RECEIVED_AT_HEADER, VERDICTS_HEADER } from './fact-stream.ts';
import { parseIngest, type Reply } from './ingest.ts';
import { BURST_SECONDS, OrgRateLimit } from './org-rate.ts';
import type { OrgDirectory } from '../domain/org-directory.ts';

/**
 * How long after a request its gate waits for the engine's verdict before it answers `{"ok": true}`
 * (the fact stored). Well under CONTRACT 8's 100 ms for another org's answer, and 9's 250 ms p99
 * while no engine runs; with an engine that keeps up, its verdict comes in a few ms.
 */
export const VERDICT_WAIT_MS = 60;
/** After a wait that ran out with no verdict since, the gate answers at once for this long (no engine runs?). */
const NO_ENGINE_MS = 1000;
/** How long a publish to SVC_FACTS may take (a cluster electing the stream's leader takes seconds)... */
const STORE_TIMEOUT_MS = 5000;
/** ...and how many times a fact not answered (a timeout, no stream, a reconnect) is published (its msg id: stored once). */
const STORE_TRIES = 3;
const STORE_BACKOFF_MS = 250;
const DRAIN_BOUND_MS = 3000;
/** How long a fact of an org the directory does not have waits for it to appear (it follows the engine's store within ~1 s). */
const ORG_WAIT_MS = 2500;
/** Facts waiting so at once, at most (more are refused at once). */
const ORG_WAITS = 1000;
/** Stores under way at once, at most (the rest wait in their orgs' queues, taken in turns). */
const STORE_WINDOW = 64;
/** Verdicts kept for a PubAck still to come, at most (the oldest dropped first). */
const EARLY_KEPT = 4096;

export interface GateDeps {
  nc: NatsConnection;
  logger: Logger;
  metrics: Metrics;
  /** real time: how long an answer waits for a verdict, the per-org rate, the log summaries */
  clock: Clock;
  /** this gate's id (unique per process) */
  gateId: string;
  /** the process's inbox prefix (INBOX_PREFIX.engine or .worker): verdicts come to <prefix>.gate.<gateId> */
  inboxPrefix: string;
  orgs: OrgDirectory | null;
  /** facts per second per org (--ingest-rate-per-org); 0 or absent: no limit */
  ratePerOrg?: number;
  /** told whether the gate can store facts (CONTRACT 9: /readyz 503 when it cannot) */
  readiness?: Readiness;
}

export interface Gate {
  /** Later requests find no responder here; every one received is stored and answered (bounded). */
  drain(): Promise<void>;
}

/** A request stored, waiting for the engine's verdict until its deadline. */
interface Waiter {
  seq: number;
  msg: Msg;
  orgId: string;
  deadline: number;
  answered: boolean;
}

export function startGate(deps: GateDeps): Gate {
  const { clock, logger, metrics } = deps;
  const dropped = new RepeatedWarnings(logger, clock, 'ingest message dropped');
  const rate = deps.ratePerOrg ? new OrgRateLimit(deps.ratePerOrg, clock) : null;
  const overRate = rate
    ? `over the ingest rate of ${rate.perSecond} facts/s per org (bursts of ${rate.perSecond * BURST_SECONDS}; --ingest-rate-per-org)`
    : '';
  const verdictSubject = `${deps.inboxPrefix}.gate.${deps.gateId}`;
  const waiting = new Map<number, Waiter>();
  /** verdicts that came before their fact's PubAck (the engine was quicker than the answer to the publish) */
  const early = new Map<number, Reply>();
  const byDeadline = new Fifo<Waiter>();
  let timer: Timer | null = null;
  let lastVerdictAt = 0;
  let lastTimeoutAt = -Infinity;
  let sent = 0;
  let inFlight = 0;
  /** requests waiting for a store to be under way, by org (taken in turns) */
  const queued = new FairQueue<{ msg: Msg; orgId: string; receivedAt: number }>();
  /** requests stored and not answered yet */
  let unanswered = 0;
  let storing = true;
  // one reply subscription and one timer for every fact stored, not a request each (js.publish: a
  // promise, a timer and two Error objects per fact; measured, a sixth of the gate's process's CPU
  // when a producer keeps 1,000 facts outstanding, bench/ingest-stream.ts)
  const facts = new JetStreamPublisher(deps.nc, deps.inboxPrefix, STORE_TIMEOUT_MS);

  const refuse = (msg: Msg, orgId: string | null, reply: Reply & { ok: false }, counted: 'invalid' | 'rate') => {
    if (counted === 'rate') metrics.rateLimited.inc({ what: 'ingest' });
    else metrics.ingestMessages.inc({ result: 'invalid' });
    dropped.warn({ org_id: orgId, error: reply.error.replace(msg.subject, '<subject>') }, { subject: msg.subject });
    respond(msg, orgId, reply);
  };

  const expire = () => {
    timer = null;
    const now = clock.now();
    for (;;) {
      const w = byDeadline.peek();
      if (!w || (!w.answered && w.deadline > now)) break;
      byDeadline.shift();
      if (w.answered) continue;
      w.answered = true;
      unanswered--;
      waiting.delete(w.seq);
      lastTimeoutAt = now;
      respond(w.msg, w.orgId, OK);
    }
    armTimer();
  };
  const armTimer = () => {
    const w = byDeadline.peek();
    if (w && !timer) timer = clock.setTimeout(expire, Math.max(0, w.deadline - clock.now()));
  };

  const verdicts = deps.nc.subscribe(verdictSubject, {
    callback: (err, m) => {
      if (err) return;
      let list: Array<[number, Reply]>;
      try {
        list = JSON.parse(m.string());
      } catch {
        return;
      }
      lastVerdictAt = clock.now();
      for (const [seq, reply] of list) {
        const w = waiting.get(seq);
        if (!w) {
          // before its PubAck: kept a moment for the waiter about to come
          early.set(seq, reply);
          if (early.size > EARLY_KEPT) early.delete(early.keys().next().value as number);
          continue;
        }
        waiting.delete(seq);
        if (w.answered) continue;
        w.answered = true;
        unanswered--;
        respond(w.msg, w.orgId, reply);
      }
    },
  });

  const store = async (msg: Msg, orgId: string, receivedAt: number) => {
    const h = natsHeaders();
    // no engine seems to run: nobody would send a verdict in time
    const wait = lastTimeoutAt <= lastVerdictAt || receivedAt - lastTimeoutAt > NO_ENGINE_MS;
    if (wait) h.set(VERDICTS_HEADER, verdictSubject);
    h.set(RECEIVED_AT_HEADER, String(receivedAt));
    inFlight++;
    try {
      // one msg id per request received: a retry of this publish is stored once; the same body
      // sent again by a producer (a heartbeat) is another fact
      h.set('Nats-Msg-Id', `${deps.gateId}.${++sent}`);
      let seq = 0;
      for (let attempt = 1; ; attempt++) {
        try {
          seq = await facts.store(factSubject(msg.subject), msg.data, h);
          break;
        } catch (err) {
          if (!(err instanceof NotStoredError && err.unanswered) || attempt >= STORE_TRIES) throw err;
          await sleep(clock, STORE_BACKOFF_MS * attempt);
        }
      }
      if (!storing) {
        storing = true;
        deps.readiness?.ready('ingest');
        logger.info('SVC_FACTS stores facts again');
      }
      if (!wait) return respond(msg, orgId, OK);
      const came = early.get(seq);
      if (came) {
        early.delete(seq);
        return respond(msg, orgId, came);
      }
      const w: Waiter = { seq, msg, orgId, deadline: receivedAt + VERDICT_WAIT_MS, answered: false };
      if (clock.now() >= w.deadline) return respond(msg, orgId, OK);
      waiting.set(seq, w);
      byDeadline.push(w);
      unanswered++;
      armTimer();
    } catch (err) {
      if (storing) {
        storing = false;
        deps.readiness?.notReady('ingest', `SVC_FACTS does not store facts: ${errorText(err)}`);
      }
      logger.warn({ org_id: orgId, err: errorText(err) }, 'a fact was not stored in SVC_FACTS');
      respond(msg, orgId, { ok: false, error: 'not recorded, try again' });
    } finally {
      inFlight--;
      // the next stores, each org's in turn
      while (inFlight < STORE_WINDOW) {
        const next = queued.next();
        if (!next) break;
        void store(next.msg, next.orgId, next.receivedAt);
      }
    }
  };

  /**
   * A request to store: at once while fewer than STORE_WINDOW stores are under way, else in its
   * org's queue. SVC_FACTS stores in the order publishes come, every org's together: an org with
   * a thousand requests outstanding would otherwise have a thousand stores ahead of another org's
   * one; taken in turns, another org's fact waits for one turn and the stores under way.
   */
  const admit = (msg: Msg, orgId: string) => {
    const receivedAt = clock.now();
    if (inFlight < STORE_WINDOW && queued.size === 0) return void store(msg, orgId, receivedAt);
    queued.push(orgId, { msg, orgId, receivedAt });
  };

  /**
   * An org the directory does not have: it may have been made a moment ago (a worker's directory
   * follows the engine's store within about a second), so it is looked for again for ORG_WAIT_MS
   * before the fact is refused; past ORG_WAITS such waits at once, refused at once.
   */
  let orgWaits = 0;
  const unknownOrg = async (msg: Msg, orgId: string) => {
    if (orgWaits >= ORG_WAITS) return refuse(msg, orgId, { ok: false, error: 'unknown org' }, 'invalid');
    orgWaits++;
    try {
      const end = clock.now() + ORG_WAIT_MS;
      while (clock.now() < end) {
        await sleep(clock, 100);
        if (deps.orgs!.has(orgId)) return admit(msg, orgId);
      }
      refuse(msg, orgId, { ok: false, error: 'unknown org' }, 'invalid');
    } finally {
      orgWaits--;
    }
  };

  const sub: Subscription = deps.nc.subscribe(ingestWildcard, {
    queue: 'svc-ingest',
    callback: (err, msg) => {
      if (err) return;
      const where = parseIngestSubject(msg.subject);
      const orgId = where?.orgId ?? null;
      const wait = rate && orgId !== null ? rate.take(orgId) : 0;
      if (wait > 0) return refuse(msg, orgId, { ok: false, error: 'rate_limited', message: overRate, retry_after_ms: wait }, 'rate');
      try {
        parseIngest(msg.subject, msg.data, where);
      } catch (e) {
        return refuse(msg, orgId, { ok: false, error: errorText(e) }, 'invalid');
      }
      if (deps.orgs?.synced && !deps.orgs.has(orgId!)) return void unknownOrg(msg, orgId!);
      admit(msg, orgId!);
    },
  });

  return {
    async drain() {
      await within(clock, sub.drain(), DRAIN_BOUND_MS);
      const end = clock.now() + DRAIN_BOUND_MS;
      while ((inFlight > 0 || queued.size > 0 || unanswered > 0) && clock.now() < end) await sleep(clock, 5);
      verdicts.unsubscribe();
      facts.close();
      timer?.cancel();
      dropped.close();
    },
  };
}

/**
 * Answer a request, but only on an inbox of the subject's org: NATS does not check a publisher's
 * reply subject against its permissions (src/bus/subjects.ts isProducerReplySubject).
 */
function respond(msg: Msg, orgId: string | null, reply: Reply): void {
  if (!msg.reply || !orgId || !isProducerReplySubject(msg.reply, orgId)) return;
  try {
    msg.respond(reply === OK ? OK_BYTES : JSON.stringify(reply));
  } catch {
    // the connection is closing: the producer's request times out, and it sends again
  }
}

const OK: Reply = { ok: true };
const OK_BYTES = new TextEncoder().encode(JSON.stringify(OK));
