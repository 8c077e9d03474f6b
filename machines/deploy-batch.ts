// A group's deploy under a rollout policy (CONTRACT 4.3 "Rollout policy"): at most `max_parallel`
// app config updates at once, started in the group's install order as earlier ones end, and a
// failure budget (`budget`: how many installs may fail, floor(size × max_failed_pct / 100)). Once
// more than the budget failed, no further install starts; the updates already running finish and
// their outcomes are recorded; then the group fails. Otherwise it succeeds once every install has
// an outcome, listing those that failed within the budget. Change windows (CONTRACT 4.3): an
// install it says to start that a window holds is handed back (`hold`): it does not count as
// running, so the next installs in order take its place, and it starts once `release`d (in order,
// as slots free); one held longer than `window_timeout` (`timeout`) stops the group like a budget
// overrun does: nothing more starts, running updates finish, then the group fails. Pure: no I/O;
// the engine feeds it the children's outcomes and the windows' answers, and starts what it emits.
import { assign, emit, setup } from 'xstate';
import { z } from 'zod';
import { machineSteps } from './advance.ts';
import { failedInstallSchema, type FailedInstall } from '../src/domain/rollout.ts';

export const BATCH_STATUSES = ['deploying', 'succeeded', 'failed'] as const;
export type BatchStatus = (typeof BATCH_STATUSES)[number];

export type { FailedInstall };

/** A deploy step's batch as the engine keeps it in the step's params (`batch`). */
export const batchSnapshotSchema = z.object({
  state: z.enum(BATCH_STATUSES),
  context: z.object({
    /** the group's installs, in the order they start */
    order: z.array(z.string()),
    max_parallel: z.number(),
    /** how many may fail with the group still succeeding */
    budget: z.number(),
    started: z.array(z.string()),
    succeeded: z.array(z.string()),
    failed: z.array(failedInstallSchema),
    /** more than the budget failed: nothing more starts */
    over_budget: z.boolean(),
    /** installs a change window holds: not started, not running, started once released */
    held: z.array(z.string()).default([]),
    /** installs held longer than window_timeout: nothing more starts, the group fails */
    timed_out: z.array(z.string()).default([]),
  }),
});
export type BatchSnapshot = z.infer<typeof batchSnapshotSchema>;
export type BatchContext = BatchSnapshot['context'];

/** The batch kept in a step's params; undefined when the step has none. */
export const batchSnapshotOf = (params: Record<string, unknown>): BatchSnapshot | undefined =>
  params.batch === undefined ? undefined : batchSnapshotSchema.parse(params.batch);

export interface BatchInput {
  order: string[];
  /** null: all at once */
  max_parallel: number | null;
  budget: number;
}

export type BatchEvent =
  /** the step begins: the first installs start */
  | { type: 'begin' }
  /** an install's update ended */
  | { type: 'ended'; install_id: string; workflow_id: string; ok: boolean; error?: string | null }
  /** these installs, just emitted to start, may not start now (a change window holds them) */
  | { type: 'hold'; install_ids: string[] }
  /** these held installs may start now */
  | { type: 'release'; install_ids: string[] }
  /** these held installs waited longer than window_timeout */
  | { type: 'timeout'; install_ids: string[] };

export type BatchEmit =
  /** start these installs' updates now */
  | { type: 'start'; install_ids: string[] }
  | { type: 'succeeded'; failed_installs: FailedInstall[] }
  /** timed_out: the installs held longer than window_timeout, when that is why */
  | { type: 'failed'; failed_installs: FailedInstall[]; timed_out?: string[] };

const running = (c: BatchContext) => c.started.length - c.succeeded.length - c.failed.length;
const hasOutcome = (c: BatchContext, id: string) => c.succeeded.includes(id) || c.failed.some((f) => f.install_id === id);

const halted = (c: BatchContext) => c.over_budget || c.timed_out.length > 0;

/** The context after an event, before anything new starts. */
function recorded(c: BatchContext, e: BatchEvent): BatchContext {
  if (e.type === 'hold') {
    const ids = e.install_ids.filter((id) => c.started.includes(id) && !hasOutcome(c, id) && !c.held.includes(id));
    return ids.length ? { ...c, started: c.started.filter((id) => !ids.includes(id)), held: [...c.held, ...ids] } : c;
  }
  if (e.type === 'release') {
    const ids = e.install_ids.filter((id) => c.held.includes(id));
    return ids.length ? { ...c, held: c.held.filter((id) => !ids.includes(id)) } : c;
  }
  if (e.type === 'timeout') {
    const ids = e.install_ids.filter((id) => c.held.includes(id) && !c.timed_out.includes(id));
    return ids.length ? { ...c, held: c.held.filter((id) => !ids.includes(id)), timed_out: [...c.timed_out, ...ids] } : c;
  }
  if (e.type !== 'ended' || !c.started.includes(e.install_id) || hasOutcome(c, e.install_id)) return c;
  if (e.ok) return { ...c, succeeded: [...c.succeeded, e.install_id] };
  const failed = [...c.failed, { install_id: e.install_id, workflow_id: e.workflow_id, error: e.error ?? 'the config update failed' }];
  return { ...c, failed, over_budget: c.over_budget || failed.length > c.budget };
}

/** The installs to start now: free slots, in order (those held left out), unless halted. */
function next(c: BatchContext): string[] {
  if (halted(c)) return [];
  const free = c.max_parallel - running(c);
  return free > 0 ? c.order.filter((id) => !c.started.includes(id) && !c.held.includes(id)).slice(0, free) : [];
}

/** Every install started has ended and nothing more will start. */
const settled = (c: BatchContext) => running(c) === 0 && (halted(c) || c.started.length === c.order.length);

/** The context after an event with what it starts. */
function stepped(c: BatchContext, e: BatchEvent): { context: BatchContext; start: string[] } {
  const r = recorded(c, e);
  const start = next(r);
  return { context: start.length ? { ...r, started: [...r.started, ...start] } : r, start };
}

/** What any news does: fail, succeed, start more, or just record it. */
const HEARD = [
  { guard: 'fails', target: 'failed', actions: ['emitFailed', 'step'] },
  { guard: 'succeeds', target: 'succeeded', actions: ['emitSucceeded', 'step'] },
  { guard: 'startsSome', actions: ['emitStart', 'step'] },
  { guard: 'news', actions: 'step' },
] as const;

export const deployBatchMachine = setup({
  types: {
    context: {} as BatchContext,
    events: {} as BatchEvent,
    input: {} as BatchInput,
    emitted: {} as BatchEmit,
  },
  guards: {
    fails: ({ context, event }) => {
      const s = stepped(context, event).context;
      return settled(s) && halted(s);
    },
    succeeds: ({ context, event }) => {
      const s = stepped(context, event).context;
      return settled(s) && !halted(s);
    },
    startsSome: ({ context, event }) => stepped(context, event).start.length > 0,
    news: ({ context, event }) => stepped(context, event).context !== context,
  },
  actions: {
    // emitted before the context moves on (emit reads the context as it was)
    emitStart: emit(({ context, event }) => ({ type: 'start' as const, install_ids: stepped(context, event).start })),
    emitSucceeded: emit(({ context, event }) => ({ type: 'succeeded' as const, failed_installs: stepped(context, event).context.failed })),
    emitFailed: emit(({ context, event }) => {
      const s = stepped(context, event).context;
      return { type: 'failed' as const, failed_installs: s.failed, ...(s.timed_out.length ? { timed_out: s.timed_out } : {}) };
    }),
    step: assign(({ context, event }) => stepped(context, event).context),
  },
}).createMachine({
  id: 'deployBatch',
  initial: 'deploying',
  context: ({ input }) => ({
    order: [...input.order],
    max_parallel: input.max_parallel ?? Math.max(1, input.order.length),
    budget: input.budget,
    started: [],
    succeeded: [],
    failed: [],
    over_budget: false,
    held: [],
    timed_out: [],
  }),
  states: {
    deploying: {
      on: {
        begin: [
          { guard: 'succeeds', target: 'succeeded', actions: ['emitSucceeded', 'step'] },
          { guard: 'startsSome', actions: ['emitStart', 'step'] },
        ],
        ended: HEARD,
        hold: HEARD,
        release: HEARD,
        timeout: HEARD,
      },
    },
    // terminal: accept nothing
    succeeded: {},
    failed: {},
  },
});

export const { initial: initialDeployBatch, advance: advanceDeployBatch } = machineSteps<
  BatchStatus,
  BatchContext,
  BatchEvent,
  BatchEmit,
  BatchInput
>(deployBatchMachine);

/** floor(size × max_failed_pct / 100): how many of a group's installs may fail (CONTRACT 4.3). */
export function failureBudget(size: number, maxFailedPct: number): number {
  return Math.floor((size * maxFailedPct) / 100);
}
