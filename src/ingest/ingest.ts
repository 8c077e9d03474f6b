// Producer ingest (CONTRACT 5.2): svc.ingest.<org>.<family>.<id> → validated input → engine.
// The reply {ok: true} is sent only after the fact is committed (or recognised as a duplicate).
// Under load, messages that arrive while a commit is under way are committed together (group
// commit: one transaction, each fact in its own savepoint), and each producer is still answered
// only once its own fact is committed. Shared fairly between orgs (CONTRACT §8) by the group commits
// of src/ingest/group-commits.ts. (The WAL checkpoints, 10-60 ms on the disk, are off this thread:
// store/checkpoints.ts.) This is embedded mode's path; in NATS mode each process's ingest gate
// (src/ingest/gate.ts) stores facts in SVC_FACTS, and the engine applies them from there
// (src/ingest/fact-stream.ts) through the same group commits.
import type { Logger } from 'pino';
import type { z } from 'zod';
import type { Bus, BusMessage, Subscription } from '../bus/bus.ts';
import { ingestWildcard, isProducerReplySubject, parseIngestSubject, type IngestSubject } from '../bus/subjects.ts';
import type { Engine, IngestResult, ProducerFact } from '../engine/engine.ts';
import { systemClock, within, type Clock } from '../domain/clock.ts';
import { errorText, EventTooLargeError, InvalidError } from '../domain/errors.ts';
import { RepeatedWarnings } from '../log-summary.ts';
import type { Metrics } from '../metrics.ts';
import { groupCommits, type GroupCommits } from './group-commits.ts';
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

export type Reply = { ok: true; warning?: string } | { ok: false; error: string; message?: string; retry_after_ms?: number };

/** A message waiting in its org's queue: parsed only when a group takes it. */
interface Waiting {
  msg: BusMessage;
  /** its subject parsed (null: not an ingest subject) */
  where: IngestSubject | null;
  orgId: string | null;
}

export function startIngest(deps: IngestDeps): Subscription {
  const clock = deps.clock ?? systemClock;
  const dropped = new RepeatedWarnings(deps.logger, clock, 'ingest message dropped');
  const groups = groupsOf(deps, clock, dropped);
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

/** A refused message's answer (counted at once; a group's accepted ones are counted together in commitGroup). */
type Refuse = (w: Waiting, reply: Reply, result: IngestResult | 'invalid') => void;

function groupsOf(deps: IngestDeps, clock: Clock, dropped: RepeatedWarnings): GroupCommits<Waiting> {
  const answer: Refuse = (w, reply, result) => {
    deps.metrics.ingestMessages.inc({ result });
    // one line per org and reason, then a count every 10 s (the subject is the first one's only)
    if (!reply.ok) dropped.warn({ org_id: w.orgId, error: reply.error.replace(w.msg.subject, '<subject>') }, { subject: w.msg.subject });
    respond(w, reply);
  };
  return groupCommits<Waiting>(
    {
      parse: (w) => parseIngest(w.msg.subject, w.msg.data, w.where),
      commit(ready, refused) {
        for (const r of refused) answer(r.item, { ok: false, error: r.error }, 'invalid');
        if (ready.length) commitGroup(deps, ready, answer);
      },
    },
    clock,
    deps.groupBudgetMs,
  );
}

/** Commit a group's facts in one transaction and answer each producer once its own is committed. */
function commitGroup(deps: IngestDeps, ready: Array<{ item: Waiting; fact: ProducerFact }>, answer: Refuse): void {
  let results;
  try {
    results = deps.engine.ingest(ready.map((r) => r.fact));
  } catch (err) {
    // the commit itself failed: nothing of the group is recorded; producers send again
    deps.logger.error({ err: errorText(err), facts: ready.length }, 'ingest commit failed');
    for (const r of ready) respond(r.item, { ok: false, error: 'not recorded, try again' });
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
      respond(ready[i].item, typeof v === 'string' ? OK : { ok: true, warning: v.warning });
    } else if (res.error instanceof EventTooLargeError)
      answer(ready[i].item, { ok: false, error: res.error.code, message: res.error.message }, 'invalid');
    else answer(ready[i].item, { ok: false, error: errorText(res.error) }, 'invalid');
  });
  for (const [result, n] of counts) deps.metrics.ingestMessages.inc({ result }, n);
}

/** What the subscription does with each message: refused at once over its org's rate, else queued with its org. */
function receiver(deps: IngestDeps, clock: Clock, dropped: RepeatedWarnings, groups: GroupCommits<Waiting>): (msg: BusMessage) => void {
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
