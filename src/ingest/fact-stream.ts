// The engine applies the SVC_FACTS stream (CONTRACT 9 "Durable ingest", NATS mode). Every svc
// process's ingest gate (src/ingest/gate.ts) stores producers' facts there and answers them; this
// reads the stream and applies the facts through the same fair group commits as embedded mode's
// ingest (src/ingest/group-commits.ts), each group's cursor written in the group's own transaction
// (store/fact-cursors.ts), so that every fact the stream holds is applied exactly once, whatever
// dies and whenever.
//
// Fair between orgs through the stream (CONTRACT 8): one ordered consumer reads the whole stream
// into per-org queues, and the group commits take from every org in turn. An org with ORG_QUEUE
// facts queued is caught up separately: the main reader passes over its facts (remembering the
// last it passed), and a reader of that org's subjects alone fills its queue as it empties, from
// its last fact queued, until it has queued every fact the main reader passed. So an org with
// 100,000 facts waiting in the stream holds at most ORG_QUEUE of them in memory, and another org's
// fact, read right after them, waits only for its turn.
//
// The main reader still reads every fact it passes over, some 50,000 a second: behind a backlog of
// 100,000 facts stored while no engine ran, another org's new fact would wait seconds before it was
// even read (measured: 1.5 s, test/isolation/facts-backlog.test.ts). So an engine that starts with
// more than ORG_QUEUE facts to read reads them twice over: the main reader up to the stream's last
// fact at the start (the backlog's end), and a tail reader from there on. The tail reader queues the
// facts of an org only once every fact of that org up to the backlog's end is queued ("cleared");
// the first fact it reads of any other org makes that org caught up by a reader of its own, from
// its last fact queued (finding its next fact is one look-up on the server, however long the
// backlog). Once the main reader reaches the backlog's end, the tail reader is the main reader.
//
// The watermark written with each group
// (every fact up to it applied) is the oldest fact still queued or not yet read; an org applied
// past it has its own cursor, and a restart passes over what each org had applied.
//
// The engine's verdict on each fact (applied, a duplicate, ignored, with a warning, or refused) is
// sent to the gate that stored it (its `Svc-Verdicts` header), which answers the producer with it
// when it comes in time; a refusal is also recorded as a late refusal (GET /v1/ingest/rejections).
import { DeliverPolicy, type ConsumerMessages, type JetStreamClient, type JsMsg } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Logger } from 'pino';
import type { Db } from '../../store/db.ts';
import { loadFactCursors, saveFactCursors } from '../../store/fact-cursors.ts';
import { FACTS_STREAM } from '../bus/nats/jetstream.ts';
import { factOrg, ingestSubjectOfFact, parseIngestSubject, INBOX_PREFIX, type IngestSubject } from '../bus/subjects.ts';
import type { Clock } from '../domain/clock.ts';
import { errorText, EventTooLargeError } from '../domain/errors.ts';
import type { Engine, IngestResult, ProducerFact } from '../engine/engine.ts';
import type { BatchResult } from '../engine/transaction.ts';
import type { Unclassified } from '../engine/runner-results.ts';
import { RepeatedWarnings } from '../log-summary.ts';
import type { IngestResultLabel, Metrics } from '../metrics.ts';
import { groupCommits, type GroupCommits } from './group-commits.ts';
import { parseIngest, type Reply } from './ingest.ts';

/** The header of a stored fact naming where its gate waits for the engine's verdict. */
export const VERDICTS_HEADER = 'Svc-Verdicts';
/** The header of a stored fact with when its gate received it (ms since the epoch). */
export const RECEIVED_AT_HEADER = 'Svc-Received-At';

/** Facts of one org queued in memory at most; past it, the org is caught up by a reader of its own. */
export const ORG_QUEUE = 4096;
/** Facts queued in memory, every org together, past which the main reader pauses (and resumes at half). */
const TOTAL_QUEUE = 32_768;
/** The watermark's rows of orgs it passed are dropped every this many groups. */
const PRUNE_EVERY = 256;
/** After a commit that failed, the stream is read again from the cursors after this long. */
const RETRY_AFTER_MS = 1000;

/** A fact read from the stream, waiting in its org's queue. */
interface StreamFact {
  seq: number;
  /** its ingest subject, svc.ingest.<org>.<family>.<id> */
  subject: string;
  where: IngestSubject | null;
  orgId: string;
  data: Uint8Array;
  /** where its gate waits for the verdict (null: nobody waits) */
  verdicts: string | null;
  receivedAt: number;
}

/** A late refusal, recorded in the transaction that passes over the fact (store/ingest-rejections.ts). */
export interface LateRefusal {
  org_id: string;
  subject: string;
  received_at: number;
  error: string;
  fact: string;
}

export interface FactStreamDeps {
  js: JetStreamClient;
  /** where the verdicts are published */
  nc: NatsConnection;
  db: Db;
  engine: Engine;
  logger: Logger;
  metrics: Metrics;
  clock: Clock;
  /** record late refusals, inside the engine's transaction */
  refused: (rows: LateRefusal[]) => void;
  /** whether an org's deliveries queue in a data plane (its facts are then held a moment, src/ingest/group-commits.ts HOLD_MS) */
  backlogged?: (orgId: string) => boolean;
  groupBudgetMs?: number;
}

export interface FactStream {
  /** facts the stream holds that are not applied yet (as far as this engine can tell) */
  pending(): number;
  /** every fact up to this stream seq is applied */
  readonly watermark: number;
  /** stop reading; what is read and not applied stays in the stream for the next engine */
  stop(): Promise<void>;
}

/** A reader of the stream from a seq on (an ordered consumer: it recovers by itself from a gap). */
class StreamReader {
  private messages: ConsumerMessages | null = null;
  private stopped = false;
  /** the stream's messages after the last one read, as the server last told */
  pending = 0;

  constructor(
    private readonly js: JetStreamClient,
    private readonly filter: string | null,
    private readonly onMessage: (m: JsMsg) => void,
    private readonly logger: Logger,
  ) {}

  async start(from: number): Promise<void> {
    const c = await this.js.consumers.get(FACTS_STREAM, {
      deliver_policy: DeliverPolicy.StartSequence,
      opt_start_seq: Math.max(1, from),
      ...(this.filter ? { filter_subjects: this.filter } : {}),
    });
    if (this.stopped) return;
    this.messages = await c.consume({
      max_messages: 256,
      callback: (m) => {
        if (this.stopped) return;
        this.pending = m.info.pending;
        this.onMessage(m);
      },
    });
    if (this.stopped) this.messages.stop();
  }

  stop(): void {
    this.stopped = true;
    try {
      this.messages?.stop();
    } catch (err) {
      this.logger.debug({ err: errorText(err) }, 'stopping a facts reader');
    }
  }
}

/** Read SVC_FACTS from the cursors in the database on, and apply it. Resolves once the main reader runs. */
export async function applyFactStream(deps: FactStreamDeps): Promise<FactStream> {
  const applier = new FactApplier(deps);
  await applier.start();
  return applier;
}

/** An org caught up by a reader of its own (see the top of the file). */
interface CatchUp {
  /** the last fact of the org the main reader passed over */
  passedUntil: number;
  /** facts the main reader passed over, not queued since (for the pending count) */
  passed: number;
  reader: StreamReader | null;
}

class FactApplier implements FactStream {
  private readonly groups: GroupCommits<StreamFact>;
  private readonly dropped: RepeatedWarnings;
  watermark = 0;
  /** the last seq the main reader took */
  private mainLast = 0;
  private main: StreamReader | null = null;
  private mainPaused = false;
  /** while a backlog is read: its last fact (the stream's last at the start), where the main reader stops */
  private backlogEnd: number | null = null;
  /** ...the reader of the facts after it (paused with the main reader), its last seq taken */
  private tail: StreamReader | null = null;
  private tailLast = 0;
  /** ...and the orgs whose facts it queues (every fact of theirs up to the backlog's end queued) */
  private readonly cleared = new Set<string>();
  /** each org's last fact queued (or applied before this process started), where past the watermark */
  private readonly lastQueued = new Map<string, number>();
  /** orgs past the watermark: their last fact applied, written with each group */
  private readonly applied = new Map<string, number>();
  private readonly catchUps = new Map<string, CatchUp>();
  private groupsCommitted = 0;
  private stopped = false;
  private resetting = false;

  constructor(private readonly deps: FactStreamDeps) {
    this.dropped = new RepeatedWarnings(deps.logger, deps.clock, 'ingest message refused late');
    this.groups = groupCommits<StreamFact>(
      { parse: (f) => parseIngest(f.subject, f.data, f.where), commit: (ready, refused) => this.commit(ready, refused) },
      deps.clock,
      deps.groupBudgetMs,
    );
    deps.metrics.setFactsPendingSource(() => this.pending());
  }

  async start(): Promise<void> {
    const cursors = loadFactCursors(this.deps.db);
    this.watermark = cursors.watermark;
    this.mainLast = cursors.watermark;
    this.lastQueued.clear();
    this.applied.clear();
    for (const [org, seq] of cursors.orgs) {
      this.lastQueued.set(org, seq);
      this.applied.set(org, seq);
    }
    this.backlogEnd = null;
    this.tail = null;
    this.cleared.clear();
    const last = (await (await this.deps.js.jetstreamManager()).streams.info(FACTS_STREAM)).state.last_seq;
    if (last - this.watermark > ORG_QUEUE) {
      this.backlogEnd = last;
      this.tailLast = last;
      this.tail = new StreamReader(this.deps.js, null, (m) => this.fromTail(m), this.deps.logger);
      await this.tail.start(last + 1);
    }
    this.main = new StreamReader(this.deps.js, null, (m) => this.fromMain(m), this.deps.logger);
    await this.main.start(this.watermark + 1);
    this.deps.logger.info({ watermark: this.watermark, orgs_ahead: cursors.orgs.size, backlog_end: this.backlogEnd }, 'applying SVC_FACTS');
  }

  pending(): number {
    let n = this.groups.size + (this.main?.pending ?? 0);
    for (const c of this.catchUps.values()) n += c.reader ? c.reader.pending : c.passed;
    return n;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.main?.stop();
    this.tail?.stop();
    for (const c of this.catchUps.values()) c.reader?.stop();
    this.groups.stopHolding();
    this.dropped.close();
  }

  private queuedUntil(org: string): number {
    return this.lastQueued.get(org) ?? this.watermark;
  }

  private fromMain(m: JsMsg): void {
    if (m.seq <= this.mainLast) return; // a reader started again delivers from where it was asked
    if (this.backlogEnd !== null && m.seq > this.backlogEnd) return this.backlogRead(); // the tail reader's
    this.mainLast = m.seq;
    this.take(m, false);
    if (this.backlogEnd !== null && m.seq >= this.backlogEnd) this.backlogRead();
  }

  private fromTail(m: JsMsg): void {
    if (this.backlogEnd === null) return this.fromMain(m); // the main reader now
    if (m.seq <= this.tailLast) return;
    this.tailLast = m.seq;
    this.take(m, true);
  }

  /** A fact read by the main or the tail reader: queued, or passed over to its org's catch-up. */
  private take(m: JsMsg, tail: boolean): void {
    const org = factOrg(m.subject);
    if (m.seq <= this.queuedUntil(org)) return; // applied before a restart, or queued by its catch-up
    const c = this.catchUps.get(org);
    if (c) {
      c.passedUntil = Math.max(c.passedUntil, m.seq);
      c.passed++;
      return;
    }
    // the tail reader's first fact of an org that may have facts in the backlog still: caught up from its last queued
    const behind = tail && !this.cleared.has(org);
    if (behind || this.groups.sizeOf(org) >= ORG_QUEUE) {
      this.catchUps.set(org, { passedUntil: m.seq, passed: 1, reader: null });
      if (behind) this.refill();
      return;
    }
    this.enqueue(org, m);
    if (this.groups.size >= TOTAL_QUEUE && !this.mainPaused) {
      this.mainPaused = true;
      this.main?.stop();
      this.tail?.stop();
    }
  }

  /** The main reader reached the backlog's end: the tail reader reads on as the main reader. */
  private backlogRead(): void {
    if (this.backlogEnd === null) return;
    this.main?.stop();
    this.main = this.tail;
    this.mainLast = this.tailLast;
    this.backlogEnd = null;
    this.tail = null;
    this.cleared.clear();
  }

  private fromCatchUp(org: string, m: JsMsg): void {
    const c = this.catchUps.get(org);
    if (!c || m.seq <= this.queuedUntil(org)) return;
    this.enqueue(org, m);
    c.passed = Math.max(0, c.passed - 1);
    if (this.queuedUntil(org) >= c.passedUntil) {
      // every fact of the org the main reader passed over is queued: it reads the org again (or the
      // tail reader, every fact of the org up to the backlog's end being queued)
      c.reader?.stop();
      this.catchUps.delete(org);
      if (this.backlogEnd !== null && c.passedUntil > this.backlogEnd) this.cleared.add(org);
    } else if (this.groups.sizeOf(org) >= ORG_QUEUE) {
      c.reader?.stop();
      c.reader = null;
    }
  }

  private enqueue(org: string, m: JsMsg): void {
    const subject = ingestSubjectOfFact(m.subject);
    const h = m.headers;
    const verdicts = h?.get(VERDICTS_HEADER) || null;
    const fact: StreamFact = {
      seq: m.seq,
      subject,
      where: parseIngestSubject(subject),
      orgId: org,
      data: m.data,
      verdicts,
      receivedAt: Number(h?.get(RECEIVED_AT_HEADER)) || this.deps.clock.now(),
    };
    this.lastQueued.set(org, m.seq);
    this.groups.take(org, fact, this.deps.backlogged?.(org) === true);
  }

  /** After each group: readers paused for room start again where there is room. */
  private refill(): void {
    if (this.stopped || this.resetting) return;
    for (const [org, c] of this.catchUps) {
      if (c.reader || this.groups.sizeOf(org) > ORG_QUEUE / 2) continue;
      const reader = new StreamReader(this.deps.js, `svc.facts.${org}.>`, (m) => this.fromCatchUp(org, m), this.deps.logger);
      c.reader = reader;
      reader.start(this.queuedUntil(org) + 1).catch((err) => this.failed('a catch-up reader did not start', err));
    }
    if (this.mainPaused && this.groups.size <= TOTAL_QUEUE / 2) {
      this.mainPaused = false;
      const reader = new StreamReader(this.deps.js, null, (m) => this.fromMain(m), this.deps.logger);
      this.main = reader;
      reader.start(this.mainLast + 1).catch((err) => this.failed('the facts reader did not start again', err));
      if (this.backlogEnd !== null) {
        const tail = new StreamReader(this.deps.js, null, (m) => this.fromTail(m), this.deps.logger);
        this.tail = tail;
        tail.start(this.tailLast + 1).catch((err) => this.failed('the tail reader did not start again', err));
      }
    }
  }

  /** The oldest fact not applied yet, less one: queued, passed over by the main reader, or not read yet. */
  private nextWatermark(): number {
    let low = this.mainLast + 1;
    for (const f of this.groups.oldest()) low = Math.min(low, f.seq);
    for (const [org, c] of this.catchUps) if (c.passedUntil > this.queuedUntil(org)) low = Math.min(low, this.queuedUntil(org) + 1);
    return Math.max(this.watermark, low - 1);
  }

  private commit(ready: Array<{ item: StreamFact; fact: ProducerFact }>, refused: Array<{ item: StreamFact; error: string }>): void {
    if (this.stopped || this.resetting) return; // left in the stream: applied by the next engine, or after the reset
    const counts = new Map<IngestResultLabel, number>();
    const count = (label: IngestResultLabel) => counts.set(label, (counts.get(label) ?? 0) + 1);
    const verdicts = new Map<string, Array<[number, Reply]>>();
    const verdict = (f: StreamFact, reply: Reply) => {
      if (!f.verdicts) return;
      let list = verdicts.get(f.verdicts);
      if (!list) verdicts.set(f.verdicts, (list = []));
      list.push([f.seq, reply]);
    };
    const late: LateRefusal[] = [];
    const refuse = (f: StreamFact, reply: Reply & { ok: false }) => {
      count('invalid');
      verdict(f, reply);
      // an org this engine does not have: nobody could list it (facts of another database's orgs,
      // on a NATS shared with it); counted and logged only
      if (reply.error !== UNKNOWN_ORG)
        late.push({
          org_id: f.orgId,
          subject: f.subject,
          received_at: f.receivedAt,
          error: reply.error,
          fact: Buffer.from(f.data.buffer, f.data.byteOffset, f.data.byteLength).toString('utf8'),
        });
      this.dropped.warn({ org_id: f.orgId, error: reply.error.replace(f.subject, '<subject>') }, { subject: f.subject });
    };
    for (const r of refused) refuse(r.item, { ok: false, error: r.error });
    const groupLast = new Map<string, number>();
    for (const r of ready) groupLast.set(r.item.orgId, r.item.seq);
    for (const r of refused) groupLast.set(r.item.orgId, Math.max(groupLast.get(r.item.orgId) ?? 0, r.item.seq));
    const record = (results: Array<BatchResult<IngestResult | Unclassified>>) => {
      results.forEach((res, i) => {
        const f = ready[i].item;
        if (res.ok) {
          const v = res.value;
          count(typeof v === 'string' ? v : v.result);
          verdict(f, typeof v === 'string' ? OK : { ok: true, warning: v.warning });
        } else if (res.error instanceof EventTooLargeError) refuse(f, { ok: false, error: res.error.code, message: res.error.message });
        else refuse(f, { ok: false, error: errorText(res.error) });
      });
      if (late.length) this.deps.refused(late);
      for (const [org, seq] of groupLast) this.applied.set(org, seq);
      const watermark = this.nextWatermark();
      for (const [org, seq] of this.applied) if (seq <= watermark) this.applied.delete(org);
      saveFactCursors(this.deps.db, watermark, this.applied, ++this.groupsCommitted % PRUNE_EVERY === 0);
      this.watermark = watermark;
    };
    try {
      if (ready.length)
        this.deps.engine.ingest(
          ready.map((r) => r.fact),
          record,
        );
      else this.deps.engine.change(() => record([]));
    } catch (err) {
      // the commit failed (a full disk?): nothing of the group is applied, and the facts are still
      // in the stream; read it again from the cursors once a moment has passed
      this.failed('applying facts failed', err);
      return;
    }
    for (const [label, n] of counts) this.deps.metrics.ingestMessages.inc({ result: label }, n);
    for (const [subject, list] of verdicts) publishVerdicts(this.deps, subject, list);
    this.refill();
  }

  /** Something went wrong reading or applying: read the stream again from the cursors the database holds. */
  private failed(what: string, err: unknown): void {
    if (this.stopped || this.resetting) return;
    this.deps.logger.error({ err: errorText(err) }, `${what}; reading SVC_FACTS again from the cursors in a moment`);
    this.resetting = true;
    this.main?.stop();
    this.tail?.stop();
    for (const c of this.catchUps.values()) c.reader?.stop();
    this.catchUps.clear();
    this.mainPaused = false;
    this.deps.clock.setTimeout(() => {
      if (this.stopped) return;
      // what is still queued is dropped (commit passes it over while resetting) once it has drained
      const restart = () => {
        if (this.groups.busy()) return void setImmediate(restart);
        this.resetting = false;
        this.start().catch((e) => this.failed('the facts reader did not start', e));
      };
      restart();
    }, RETRY_AFTER_MS);
  }
}

const OK: Reply = { ok: true };
/** The engine's refusal of a fact whose org it does not have (src/engine/engine.ts ingest). */
const UNKNOWN_ORG = 'unknown org';

/** Where a gate waits for verdicts: only under the inbox prefixes of svc's own processes. */
function verdictSubjectOk(subject: string): boolean {
  return subject.startsWith(`${INBOX_PREFIX.engine}.gate.`) || subject.startsWith(`${INBOX_PREFIX.worker}.gate.`);
}

function publishVerdicts(deps: FactStreamDeps, subject: string, list: Array<[number, Reply]>): void {
  if (!verdictSubjectOk(subject)) return;
  try {
    deps.nc.publish(subject, JSON.stringify(list));
  } catch (err) {
    // the gate answers ok once it has waited long enough: the fact is stored either way
    deps.logger.debug({ err: errorText(err) }, 'a verdict was not sent');
  }
}
