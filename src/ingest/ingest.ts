// Producer ingest (CONTRACT 5.2): svc.ingest.<org>.<family>.<id> → validated input → engine.
// The reply {ok: true} is sent only after the fact is committed (or recognised as a duplicate).
// Under load, messages that arrive while a commit is under way are committed together (group
// commit: one transaction, each fact in its own savepoint), and each producer is still answered
// only once its own fact is committed. Shared fairly between orgs (CONTRACT §8): messages wait in
// their org's queue, and each group takes from every org with messages in turn (src/domain/fair-queue.ts),
// parsing each only when it is taken; a group is bounded by a time budget, and an org with only a
// few messages waiting beside another's backlog has them in a short group (one turn of each org),
// so an org's flood never makes another org's fact wait for more than the group under way and a
// short one. (The WAL checkpoints, 10-60 ms on the disk, are off this thread: store/checkpoints.ts.)
import { performance } from 'node:perf_hooks';
import type { Logger } from 'pino';
import type { z } from 'zod';
import type { Bus, BusMessage, Subscription } from '../bus/bus.ts';
import { ingestWildcard, isProducerReplySubject, parseIngestSubject, type IngestSubject } from '../bus/subjects.ts';
import type { Engine, IngestResult, ProducerFact } from '../engine/engine.ts';
import { systemClock, within, type Clock, type Timer } from '../domain/clock.ts';
import { errorText, EventTooLargeError, InvalidError } from '../domain/errors.ts';
import { RepeatedWarnings } from '../log-summary.ts';
import type { Metrics } from '../metrics.ts';
import { FairQueue } from '../domain/fair-queue.ts';
import { BURST_SECONDS, OrgRateLimit } from './org-rate.ts';
import { healthMessageSchema, jobResultSchema, runnerMessageSchema, workflowMessageSchema } from '../domain/producer-messages.ts';

export interface IngestDeps {
  bus: Bus;
  logger: Logger;
  metrics: Metrics;
  engine: Engine;
  /** the time of the log summaries, of the drain's bounds and of the per-org rate (real time by default) */
  clock?: Clock;
  /** facts per second per org (CONTRACT 8 --ingest-rate-per-org, bursts of four times as many); 0 or absent: no limit */
  ratePerOrg?: number;
  /** what one group commit may cost, in ms (GROUP_BUDGET_MS; for measurements) */
  groupBudgetMs?: number;
  /**
   * Whether the org's deliveries queue in a data plane now (src/outcomes/status-book.ts
   * backlogged): its facts are then held up to HOLD_MS for others to commit with them
   */
  backlogged?: (orgId: string) => boolean;
}

/** Messages taken into one group commit at most. */
const MAX_GROUP = 512;
/** ...and at least (when the recent cost per message says fewer would fit the budget) */
const MIN_GROUP = 8;
/**
 * What one group may cost (parsing, the commit, the answers), in wall time, estimated from the
 * recent cost per message. A group runs without a break on this thread, and a fact that arrives
 * while one runs waits for it and then for its own (a short one, below): this keeps another org's
 * answer within 100 ms (CONTRACT §8) while a flood fills every group. The fixed cost of a commit is under 1 ms: groups
 * of this size (~80 workflow facts on an idle core, fewer on a busy one) cost a few per cent more
 * engine CPU per fact than groups of 512 (measured: 113 µs at 512, 115 at 128, 120 at 64).
 */
const GROUP_BUDGET_MS = 10;
const FIRST_GUESS_MS_PER_ITEM = 0.1;
/** An org with at most this many messages waiting, beside one with more, is answered in a short group. */
const SPARSE = 4;
/**
 * A fact of an org whose deliveries queue in a data plane (each of its recent attempts waited 20 ms
 * or more before it started: src/dataplane/pipeline.ts BACKLOG_WAIT_MS) is held this long for more
 * facts before its group commits. Its event would wait behind that org's queued attempts anyway,
 * longer than the hold, so it is not delivered later; and under load one commit, one socket write of
 * answers and one hop message carry several facts instead of one each. A fact of any other org (and
 * the drain) commits every waiting fact at once, as does a group that has HOLD_UNTIL facts.
 */
export const HOLD_MS = 3;
const HOLD_UNTIL = 64;

function parse<S extends z.ZodType>(schema: S, value: unknown): z.infer<S> {
  const r = schema.safeParse(value);
  if (!r.success) {
    const first = r.error.issues[0];
    throw new InvalidError(`invalid message: ${first.path.join('.') || '(message)'}: ${first.message}`);
  }
  return r.data;
}

/**
 * Subject and payload checks that need no transaction; throws with the reason (invalid). `where`:
 * the subject parsed already (the subscription parses it once, to queue the message by its org).
 */
export function parseIngest(subject: string, data: Uint8Array, where: IngestSubject | null = parseIngestSubject(subject)): ProducerFact {
  if (!where) throw new InvalidError(`unknown ingest subject ${subject}`);
  let body: unknown;
  try {
    body = JSON.parse(Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString('utf8'));
  } catch {
    throw new InvalidError('message is not JSON');
  }
  const { orgId, id } = where;
  switch (where.family) {
    case 'jobs':
      return { family: 'jobs', orgId, id, body: parse(jobResultSchema, body) };
    case 'workflows':
      return { family: 'workflows', orgId, id, body: parse(workflowMessageSchema, body) };
    case 'runners':
      return { family: 'runners', orgId, id, body: parse(runnerMessageSchema, body) };
    case 'health':
      return { family: 'health', orgId, id, body: parse(healthMessageSchema, body) };
  }
}

type Reply = { ok: true; warning?: string } | { ok: false; error: string; message?: string; retry_after_ms?: number };

/** A message waiting in its org's queue: parsed only when a group takes it. */
interface Waiting {
  msg: BusMessage;
  /** its subject parsed (null: not an ingest subject) */
  where: IngestSubject | null;
  orgId: string | null;
}

/**
 * How many messages the next group takes. As many as fit in the time budget at the recent cost per
 * message (at least MIN_GROUP, at most MAX_GROUP); but when an org has only a few messages waiting
 * beside a backlog, one turn of each org (at least MIN_GROUP messages), committed at once, so that
 * its answer does not wait for a full group after the one under way; at most every other group, so
 * that steady trickles cost a flood no more than a small commit per full one.
 */
export function nextGroup(q: { budgetMs: number; msPerItem: number; lastShort: boolean; keys: number; fewest: number; size: number }): {
  limit: number;
  short: boolean;
} {
  const full = Math.max(MIN_GROUP, Math.min(MAX_GROUP, Math.floor(q.budgetMs / q.msPerItem)));
  const short = !q.lastShort && q.keys > 1 && q.fewest <= SPARSE && q.size > Math.max(MIN_GROUP, q.keys);
  return { limit: short ? Math.min(full, Math.max(MIN_GROUP, q.keys)) : full, short };
}

export function startIngest(deps: IngestDeps): Subscription {
  const clock = deps.clock ?? systemClock;
  const dropped = new RepeatedWarnings(deps.logger, clock, 'ingest message dropped');
  const groups = groupCommits(deps, clock, dropped);
  const sub = deps.bus.subscribe(ingestWildcard, receiver(deps, clock, dropped, groups), { queue: 'svc-ingest' });
  return {
    unsubscribe() {
      sub.unsubscribe();
      dropped.close();
      groups.stopHolding(); // what was received is still committed and answered
    },
    // Shutdown (CONTRACT 1): later requests find no responder (the producer sends to another
    // process); every one already received is committed and answered, and the answers are sent.
    // Bounded: with the NATS connection down nothing can be confirmed (nor answered), and the
    // deliveries still have to drain within the shutdown's limit.
    async drain() {
      groups.stopHolding();
      await within(clock, sub.drain(), DRAIN_BOUND_MS);
      while (groups.busy()) await new Promise<void>((r) => setImmediate(r));
      await within(clock, deps.bus.flush(), DRAIN_BOUND_MS);
      dropped.close();
    },
  };
}

/** The messages waiting in their orgs' queues and the group commits that take them. */
interface GroupCommits {
  /** Queue a message under `key` (its org); `held`: its group may wait HOLD_MS for more facts. */
  take(key: string, w: Waiting, held: boolean): void;
  /** From now on nothing is held, and what is held now commits at the next turn (unsubscribe, drain). */
  stopHolding(): void;
  /** Messages wait, or a group is to run. */
  busy(): boolean;
}

/** A refused message's answer (counted at once; a group's accepted ones are counted together in commitGroup). */
type Refuse = (w: Waiting, reply: Reply, result: IngestResult | 'invalid') => void;

function groupCommits(deps: IngestDeps, clock: Clock, dropped: RepeatedWarnings): GroupCommits {
  const waiting = new FairQueue<Waiting>();
  const budgetMs = deps.groupBudgetMs ?? GROUP_BUDGET_MS;
  let msPerItem = FIRST_GUESS_MS_PER_ITEM;
  /** a group is to run: at the next turn of the loop (`now`), or once HOLD_MS are up (`held`) */
  let scheduled: 'now' | 'held' | null = null;
  let hold: Timer | null = null;
  let draining = false;
  let lastShort = false;

  const answer: Refuse = (w, reply, result) => {
    deps.metrics.ingestMessages.inc({ result });
    // one line per org and reason, then a count every 10 s (the subject is the first one's only)
    if (!reply.ok) dropped.warn({ org_id: w.orgId, error: reply.error.replace(w.msg.subject, '<subject>') }, { subject: w.msg.subject });
    respond(w, reply);
  };

  const run = () => {
    scheduled = null;
    hold = null; // run by its timer, or once schedule() let it go
    const started = performance.now();
    const { limit, short } = nextGroup({ budgetMs, msPerItem, lastShort, keys: waiting.keys, fewest: waiting.fewest, size: waiting.size });
    lastShort = short;
    const ready: Array<{ w: Waiting; fact: ProducerFact }> = [];
    let taken = 0;
    while (taken < limit) {
      const w = waiting.next();
      if (!w) break;
      taken++;
      try {
        ready.push({ w, fact: parseIngest(w.msg.subject, w.msg.data, w.where) });
      } catch (err) {
        answer(w, { ok: false, error: errorText(err) }, 'invalid');
      }
    }
    if (waiting.size) schedule(false);
    if (ready.length) commitGroup(deps, ready, answer);
    // the recent cost per message, from full groups (a short one's includes the commit's fixed cost)
    if (!short) msPerItem = 0.7 * msPerItem + 0.3 * ((performance.now() - started) / Math.max(1, taken));
  };

  const schedule = (held: boolean) => {
    if (scheduled === 'now') return;
    if (held && !draining && waiting.size < HOLD_UNTIL) {
      if (scheduled === null) {
        scheduled = 'held';
        hold = clock.setTimeout(run, HOLD_MS);
      }
      return;
    }
    hold?.cancel();
    hold = null;
    scheduled = 'now';
    setImmediate(run);
  };

  return {
    take(key, w, held) {
      waiting.push(key, w);
      schedule(held);
    },
    stopHolding() {
      draining = true;
      if (scheduled === 'held') schedule(false);
    },
    busy: () => scheduled !== null || waiting.size > 0,
  };
}

/** Commit a group's facts in one transaction and answer each producer once its own is committed. */
function commitGroup(deps: IngestDeps, ready: Array<{ w: Waiting; fact: ProducerFact }>, answer: Refuse): void {
  let results;
  try {
    results = deps.engine.ingest(ready.map((r) => r.fact));
  } catch (err) {
    // the commit itself failed: nothing of the group is recorded; producers send again
    deps.logger.error({ err: errorText(err), facts: ready.length }, 'ingest commit failed');
    for (const r of ready) respond(r.w, { ok: false, error: 'not recorded, try again' });
    return;
  }
  // the group's results counted once each (a labelled inc per message is a hash of its labels)
  const counts = new Map<IngestResult | 'unclassified', number>();
  results.forEach((res, i) => {
    if (res.ok) {
      const v = res.value;
      // a fact that can never emit (CONTRACT 10.3): stored, and the producer told why
      const label = typeof v === 'string' ? v : v.result;
      counts.set(label, (counts.get(label) ?? 0) + 1);
      respond(ready[i].w, typeof v === 'string' ? OK : { ok: true, warning: v.warning });
    } else if (res.error instanceof EventTooLargeError)
      answer(ready[i].w, { ok: false, error: res.error.code, message: res.error.message }, 'invalid');
    else answer(ready[i].w, { ok: false, error: errorText(res.error) }, 'invalid');
  });
  for (const [result, n] of counts) deps.metrics.ingestMessages.inc({ result }, n);
}

/** What the subscription does with each message: refused at once over its org's rate, else queued with its org. */
function receiver(deps: IngestDeps, clock: Clock, dropped: RepeatedWarnings, groups: GroupCommits): (msg: BusMessage) => void {
  const rate = deps.ratePerOrg ? new OrgRateLimit(deps.ratePerOrg, clock) : null;
  const overRate = rate
    ? `over the ingest rate of ${rate.perSecond} facts/s per org (bursts of ${rate.perSecond * BURST_SECONDS}; --ingest-rate-per-org)`
    : '';
  return (msg) => {
    const where = parseIngestSubject(msg.subject);
    const orgId = where?.orgId ?? null;
    // over its org's rate: answered at once, before it is queued (CONTRACT 8)
    const wait = rate && orgId !== null ? rate.take(orgId) : 0;
    if (wait > 0) {
      deps.metrics.rateLimited.inc({ what: 'ingest' });
      dropped.warn({ org_id: orgId, error: 'rate_limited' }, { subject: msg.subject });
      respond({ msg, where, orgId }, { ok: false, error: 'rate_limited', message: overRate, retry_after_ms: wait });
      return;
    }
    // a subject that does not parse waits with the org it names, if any (svc.ingest.<org>.…)
    groups.take(orgId ?? msg.subject.split('.', 3)[2] ?? '', { msg, where, orgId }, orgId !== null && deps.backlogged?.(orgId) === true);
  };
}

/**
 * Answer a request, but only on an inbox of the subject's org: NATS does not check a publisher's
 * reply subject against its permissions, so a producer could otherwise have the engine publish on
 * svc.events.… or answer another org's request (src/bus/subjects.ts isProducerReplySubject).
 */
function respond({ msg, orgId }: Waiting, reply: Reply): void {
  if (msg.reply && orgId && isProducerReplySubject(msg.reply, orgId)) msg.respond(reply === OK ? OK_BYTES : JSON.stringify(reply));
}

/** The answer to a fact committed (or recognised as a duplicate or ignored), encoded once. */
const OK: Reply = { ok: true };
const OK_BYTES = new TextEncoder().encode(JSON.stringify(OK));

const DRAIN_BOUND_MS = 3000;
