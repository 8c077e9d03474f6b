// A group's verification gate (CONTRACT 4.3 "Rollout policy", `verification`): after the group's
// deploy each verification URL is asked at once, then again every `interval` until its answer
// settles it. Per URL it keeps the attempt counter, the failures in a row, when it was first asked,
// when it is to be asked next and its last answer. A `pass` settles that URL; a `fail` fails the
// gate at once; a `pending` is asked again after `interval`; an `error` (any other answer, a
// timeout, a refused target) counts one failure, and `failure_limit` of them in a row fail the
// gate, as does `max_wait` since the first ask without a pass. The gate passes once every URL
// passed. Pure: no I/O; time is the engine's, given in each event (`at`, ms); the engine asks the
// URLs it is told to and feeds back their answers.
import { assign, emit, setup } from 'xstate';
import { z } from 'zod';
import { machineSteps } from './advance.ts';
import { verifyAnswerSchema, type VerifyAnswer } from '../src/domain/verification.ts';

export const VERIFY_STATUSES = ['verifying', 'passed', 'failed'] as const;
export type VerifyStatus = (typeof VERIFY_STATUSES)[number];

const checkSchema = z.object({
  /** the URL as it may be shown (no query, no credentials) */
  shown: z.string(),
  interval_ms: z.number(),
  max_wait_ms: z.number(),
  failure_limit: z.number(),
  /** requests made so far (the next one's `attempt` is this + 1) */
  attempt: z.number(),
  /** failures in a row */
  failures: z.number(),
  /** when it was first asked (ms), null before */
  first_at: z.number().nullable(),
  /**
   * when it is to be asked (again): after an answer, its time + interval; after an ask, the ask's +
   * interval (an ask lost to a crash is made again then)
   */
  next_at: z.number(),
  passed: z.boolean(),
  last: verifyAnswerSchema.nullable(),
});
export type VerifyCheck = z.infer<typeof checkSchema>;

/** Why the gate failed: which URL, and the step's error. */
const failureSchema = z.object({ index: z.number(), error: z.string(), reason: z.string().nullable() });
export type VerifyFailure = z.infer<typeof failureSchema>;

/** A verify step's gate as the engine keeps it in the step's params (`verify`). */
export const verifySnapshotSchema = z.object({
  state: z.enum(VERIFY_STATUSES),
  context: z.object({ checks: z.array(checkSchema), failure: failureSchema.nullable() }),
});
export type VerifySnapshot = z.infer<typeof verifySnapshotSchema>;
export type VerifyContext = VerifySnapshot['context'];

/** The gate kept in a step's params; undefined when the step has none. */
export const verifySnapshotOf = (params: Record<string, unknown>): VerifySnapshot | undefined =>
  params.verify === undefined ? undefined : verifySnapshotSchema.parse(params.verify);

export interface VerifyInput {
  checks: Array<{ shown: string; interval_ms: number; max_wait_ms: number; failure_limit: number }>;
  /** the step's start: every URL is asked then */
  at: number;
}

export type VerifyEvent =
  /** the engine's clock now; `busy`: URLs (indexes) whose request is still in flight in this process */
  | { type: 'tick'; at: number; busy?: number[] }
  /** an answer of URL `index` (its verdict, status, error, reason) at `at` */
  | { type: 'answer'; index: number; at: number; answer: Omit<VerifyAnswer, 'at'> };

export type VerifyEmit =
  /** ask these URLs now (`attempt`: the how-manieth request to that URL) */
  { type: 'ask'; asks: Array<{ index: number; attempt: number }> } | { type: 'passed' } | { type: 'failed'; failure: VerifyFailure };

const iso = (ms: number) => new Date(ms).toISOString();
/** 1h, 30m, 90s: a duration as people read it. */
const dur = (ms: number) =>
  ms % 3_600_000 === 0 ? `${ms / 3_600_000}h` : ms % 60_000 === 0 ? `${ms / 60_000}m` : `${Math.round(ms / 1000)}s`;

/** The first URL that has waited `max_wait` since its first ask without passing, at `at`. */
function overdue(checks: VerifyCheck[], at: number): VerifyFailure | null {
  const i = checks.findIndex((c) => !c.passed && c.first_at !== null && at - c.first_at >= c.max_wait_ms);
  if (i < 0) return null;
  const c = checks[i];
  return { index: i, error: `verification ${c.shown} did not pass within ${dur(c.max_wait_ms)} (${c.attempt} requests)`, reason: null };
}

interface Outcome {
  context: VerifyContext;
  asks: Array<{ index: number; attempt: number }>;
  failure: VerifyFailure | null;
  passed: boolean;
}

/** What an event does to the context: the new context, the asks, a failure, a pass. */
function outcome(c: VerifyContext, e: VerifyEvent): Outcome {
  const checks = c.checks.map((x) => ({ ...x }));
  const asks: Outcome['asks'] = [];
  let failure: VerifyFailure | null = null;
  if (e.type === 'tick') {
    failure = overdue(checks, e.at);
    if (!failure) {
      checks.forEach((x, index) => {
        if (x.passed || x.next_at > e.at || e.busy?.includes(index)) return;
        x.attempt += 1;
        x.first_at ??= e.at;
        x.next_at = e.at + x.interval_ms;
        asks.push({ index, attempt: x.attempt });
      });
    }
  } else {
    const x = checks[e.index];
    if (x && !x.passed) {
      const a = e.answer;
      x.last = { ...a, at: iso(e.at) };
      if (a.verdict === 'pass') x.passed = true;
      else if (a.verdict === 'fail')
        failure = { index: e.index, error: `verification ${x.shown} answered fail: ${a.reason ?? 'no reason given'}`, reason: a.reason };
      else {
        x.failures = a.verdict === 'pending' ? 0 : x.failures + 1;
        x.next_at = e.at + x.interval_ms;
        if (x.failures >= x.failure_limit)
          failure = {
            index: e.index,
            error: `verification ${x.shown} failed ${x.failures} times in a row (last: ${a.error ?? 'no answer'})`,
            reason: null,
          };
      }
      failure ??= overdue(checks, e.at);
    }
  }
  return { context: { checks, failure: failure ?? c.failure }, asks, failure, passed: !failure && checks.every((x) => x.passed) };
}

export const verificationMachine = setup({
  types: {
    context: {} as VerifyContext,
    events: {} as VerifyEvent,
    input: {} as VerifyInput,
    emitted: {} as VerifyEmit,
  },
  guards: {
    fails: ({ context, event }) => outcome(context, event).failure !== null,
    passes: ({ context, event }) => outcome(context, event).passed,
    asksSome: ({ context, event }) => outcome(context, event).asks.length > 0,
  },
  actions: {
    // emitted before the context moves on (emit reads the context as it was)
    emitFailed: emit(({ context, event }) => ({ type: 'failed' as const, failure: outcome(context, event).failure! })),
    emitPassed: emit({ type: 'passed' as const }),
    emitAsk: emit(({ context, event }) => ({ type: 'ask' as const, asks: outcome(context, event).asks })),
    step: assign(({ context, event }) => outcome(context, event).context),
  },
}).createMachine({
  id: 'verification',
  initial: 'verifying',
  context: ({ input }) => ({
    checks: input.checks.map((c) => ({ ...c, attempt: 0, failures: 0, first_at: null, next_at: input.at, passed: false, last: null })),
    failure: null,
  }),
  states: {
    verifying: {
      on: {
        tick: [
          { guard: 'fails', target: 'failed', actions: ['emitFailed', 'step'] },
          { guard: 'asksSome', actions: ['emitAsk', 'step'] },
        ],
        answer: [
          { guard: 'fails', target: 'failed', actions: ['emitFailed', 'step'] },
          { guard: 'passes', target: 'passed', actions: ['emitPassed', 'step'] },
          { actions: 'step' },
        ],
      },
    },
    // terminal: accept nothing
    passed: {},
    failed: {},
  },
});

export const { initial: initialVerification, advance: advanceVerification } = machineSteps<
  VerifyStatus,
  VerifyContext,
  VerifyEvent,
  VerifyEmit,
  VerifyInput
>(verificationMachine);

/** When the gate is next to be looked at (ms): its earliest ask, or a URL's `max_wait`; null once it has ended. */
export function nextWakeOf(s: VerifySnapshot): number | null {
  if (s.state !== 'verifying') return null;
  const times = s.context.checks
    .filter((c) => !c.passed)
    .flatMap((c) => [c.next_at, ...(c.first_at !== null ? [c.first_at + c.max_wait_ms] : [])]);
  return times.length ? Math.min(...times) : null;
}
