// Group commits shared fairly between orgs (CONTRACT §8), whatever the facts come from: producers'
// requests on the bus (src/ingest/ingest.ts, embedded mode) or the SVC_FACTS stream the ingest gates
// store them in (src/ingest/fact-stream.ts, NATS mode). Items wait in their org's queue, and each
// group takes from every org with items in turn (src/domain/fair-queue.ts), parsing each only when it
// is taken; a group is bounded by a time budget, and an org with only a few items waiting beside
// another's backlog has them in a short group (one turn of each org), so an org's flood never makes
// another org's fact wait for more than the group under way and a short one.
import { performance } from 'node:perf_hooks';
import type { ProducerFact } from '../engine/engine.ts';
import type { Clock, Timer } from '../domain/clock.ts';
import { errorText } from '../domain/errors.ts';
import { FairQueue } from '../domain/fair-queue.ts';

/** Items taken into one group commit at most. */
const MAX_GROUP = 512;
/** ...and at least (when the recent cost per item says fewer would fit the budget) */
const MIN_GROUP = 8;
/**
 * What one group may cost (parsing, the commit, the answers), in wall time, estimated from the
 * recent cost per item. A group runs without a break on this thread, and a fact that arrives
 * while one runs waits for it and then for its own (a short one, below): this keeps another org's
 * answer within 100 ms (CONTRACT §8) while a flood fills every group. The fixed cost of a commit is under 1 ms: groups
 * of this size (~80 workflow facts on an idle core, fewer on a busy one) cost a few per cent more
 * engine CPU per fact than groups of 512 (measured: 113 µs at 512, 115 at 128, 120 at 64).
 */
export const GROUP_BUDGET_MS = 10;
const FIRST_GUESS_MS_PER_ITEM = 0.1;
/** An org with at most this many items waiting, beside one with more, is answered in a short group. */
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

/**
 * How many items the next group takes. As many as fit in the time budget at the recent cost per
 * item (at least MIN_GROUP, at most MAX_GROUP); but when an org has only a few items waiting
 * beside a backlog, one turn of each org (at least MIN_GROUP items), committed at once, so that
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

/** What a group's items come from: how each is parsed, and what is done with a group once taken. */
export interface GroupSource<T> {
  /** The item as a fact; throws with the reason it is refused (invalid). */
  parse(item: T): ProducerFact;
  /** A group taken: `ready` to commit (in order), `refused` with the reason each did not parse. */
  commit(ready: Array<{ item: T; fact: ProducerFact }>, refused: Array<{ item: T; error: string }>): void;
}

/** The items waiting in their orgs' queues and the group commits that take them. */
export interface GroupCommits<T> {
  /** Queue an item under `key` (its org); `held`: its group may wait HOLD_MS for more facts. */
  take(key: string, item: T, held: boolean): void;
  /** From now on nothing is held, and what is held now commits at the next turn (unsubscribe, drain). */
  stopHolding(): void;
  /** Items wait, or a group is to run. */
  busy(): boolean;
  /** Items waiting under one key. */
  sizeOf(key: string): number;
  /** Items waiting, every key together. */
  readonly size: number;
  /** The oldest item waiting of each key. */
  oldest(): IterableIterator<T>;
}

export function groupCommits<T>(source: GroupSource<T>, clock: Clock, budgetMs = GROUP_BUDGET_MS): GroupCommits<T> {
  const waiting = new FairQueue<T>();
  let msPerItem = FIRST_GUESS_MS_PER_ITEM;
  /** a group is to run: at the next turn of the loop (`now`), or once HOLD_MS are up (`held`) */
  let scheduled: 'now' | 'held' | null = null;
  let hold: Timer | null = null;
  let draining = false;
  let lastShort = false;

  const run = () => {
    scheduled = null;
    hold = null; // run by its timer, or once schedule() let it go
    const started = performance.now();
    const { limit, short } = nextGroup({ budgetMs, msPerItem, lastShort, keys: waiting.keys, fewest: waiting.fewest, size: waiting.size });
    lastShort = short;
    const ready: Array<{ item: T; fact: ProducerFact }> = [];
    const refused: Array<{ item: T; error: string }> = [];
    let taken = 0;
    while (taken < limit) {
      const item = waiting.next();
      if (item === undefined) break;
      taken++;
      try {
        ready.push({ item, fact: source.parse(item) });
      } catch (err) {
        refused.push({ item, error: errorText(err) });
      }
    }
    if (waiting.size) schedule(false);
    if (taken) source.commit(ready, refused);
    // the recent cost per item, from full groups (a short one's includes the commit's fixed cost)
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
    take(key, item, held) {
      waiting.push(key, item);
      schedule(held);
    },
    stopHolding() {
      draining = true;
      if (scheduled === 'held') schedule(false);
    },
    busy: () => scheduled !== null || waiting.size > 0,
    sizeOf: (key) => waiting.sizeOf(key),
    oldest: () => waiting.oldest(),
    get size() {
      return waiting.size;
    },
  };
}
