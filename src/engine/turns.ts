// Work that grows with what an org stores, cut into turns of the engine's thread (CONTRACT §8 "No
// request holds the engine"): a read over a large fleet (a plan of 1,000 installs) is written once,
// as a generator that yields between pieces, and run either at once (inside a transaction, where
// nothing may come between its reads and its writes) or in turns of a few milliseconds each, the
// event loop serving other orgs' requests, facts and timers between them.
import { performance } from 'node:perf_hooks';

/** A piece of work that yields (nothing) wherever it may pause, and returns its result. */
export type Sliced<T> = Generator<void, T, void>;

/** How long one turn of sliced work runs before it lets the event loop serve others (ms). */
export const TURN_BUDGET_MS = 4;

/** Run it to its end at once (in a transaction: its reads and what is written from them see one state). */
export function runAtOnce<T>(work: Sliced<T>): T {
  for (;;) {
    const r = work.next();
    if (r.done) return r.value;
  }
}

/**
 * Run it in turns of about `budgetMs` each: between turns, whatever else waits on the event loop
 * runs (another request, a group commit, a timer). What it reads may change between two turns: use
 * it for answers that change nothing (a plan_only), not for a write's checks.
 */
export async function runInTurns<T>(work: Sliced<T>, budgetMs = TURN_BUDGET_MS): Promise<T> {
  let start = performance.now();
  for (;;) {
    const r = work.next();
    if (r.done) return r.value;
    if (performance.now() - start >= budgetMs) {
      await new Promise<void>((resolve) => setImmediate(resolve));
      start = performance.now();
    }
  }
}

/** A turn of the engine's thread longer than this is what CONTRACT §8 rules out. */
export const TURN_LIMIT_MS = 50;

/** What ran on the thread lately (a request's route, a batch of facts): the causes a long turn is logged with. */
const causes: Array<{ at: number; what: string }> = [];
const CAUSES_KEPT = 32;

/** Guards running: without one, nothing is noted. */
let guards = 0;

/**
 * Note what is about to run on the engine's thread, while a guard runs (without one it does
 * nothing). A long turn is reported with the causes noted during it.
 */
export function noteTurnCause(what: string): void {
  if (guards === 0) return;
  if (causes.length >= CAUSES_KEPT) causes.shift();
  causes.push({ at: performance.now(), what });
}

/** Where a guard reports a turn over the limit. */
export interface TurnGuardLog {
  warn(obj: Record<string, unknown>, msg: string): void;
}

/**
 * The development guard of CONTRACT §8 (SVC_TURN_GUARD=1): a timer every 10 ms measures how late it
 * runs; a lateness past TURN_LIMIT_MS means something held the thread that long, and it is logged
 * with what was noted as running meanwhile. Off unless asked for: it costs a timer wake-up every
 * 10 ms. It watches the real thread, so it runs on the system's time, not the engine's clock.
 */
export function startTurnGuard(log: TurnGuardLog, o: { limitMs?: number; everyMs?: number } = {}): { stop(): void } {
  const limit = o.limitMs ?? TURN_LIMIT_MS;
  const every = o.everyMs ?? 10;
  let last = performance.now();
  const timer = setInterval(() => {
    const now = performance.now();
    const held = now - last - every;
    if (held > limit) {
      const during = causes.filter((c) => c.at >= last - every).map((c) => c.what);
      log.warn(
        { turn_ms: Math.round(held), during: [...new Set(during)] },
        `the engine's thread was held ${Math.round(held)} ms (over ${limit} ms)`,
      );
    }
    last = now;
  }, every);
  timer.unref();
  guards++;
  let stopped = false;
  return {
    stop: () => {
      if (stopped) return;
      stopped = true;
      guards--;
      clearInterval(timer);
    },
  };
}
