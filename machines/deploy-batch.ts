// A group's deploy under a rollout policy (CONTRACT 4.3 "Rollout policy"): at most `max_parallel`
// app config updates at once, started in the group's install order as earlier ones end, and a
// failure budget (`budget`: how many installs may fail, floor(size × max_failed_pct / 100)). Once
// more than the budget failed, no further install starts; the updates already running finish and
// their outcomes are recorded; then the group fails. Otherwise it succeeds once every install has
// an outcome, listing those that failed within the budget. Pure: no I/O; the engine feeds it the
// children's outcomes and starts what it emits.
import { assign, emit, setup } from 'xstate';
import { z } from 'zod';
import { advance, initial } from './advance.ts';
import type { Advanced } from './advance.ts';
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
  | { type: 'ended'; install_id: string; workflow_id: string; ok: boolean; error?: string | null };

export type BatchEmit =
  /** start these installs' updates now */
  | { type: 'start'; install_ids: string[] }
  | { type: 'succeeded'; failed_installs: FailedInstall[] }
  | { type: 'failed'; failed_installs: FailedInstall[] };

const running = (c: BatchContext) => c.started.length - c.succeeded.length - c.failed.length;
const hasOutcome = (c: BatchContext, id: string) => c.succeeded.includes(id) || c.failed.some((f) => f.install_id === id);

/** The context after an event, before anything new starts. */
function recorded(c: BatchContext, e: BatchEvent): BatchContext {
  if (e.type !== 'ended' || !c.started.includes(e.install_id) || hasOutcome(c, e.install_id)) return c;
  if (e.ok) return { ...c, succeeded: [...c.succeeded, e.install_id] };
  const failed = [...c.failed, { install_id: e.install_id, workflow_id: e.workflow_id, error: e.error ?? 'the config update failed' }];
  return { ...c, failed, over_budget: c.over_budget || failed.length > c.budget };
}

/** The installs to start now: free slots, in order, unless over budget. */
function next(c: BatchContext): string[] {
  if (c.over_budget) return [];
  const free = c.max_parallel - running(c);
  return free > 0 ? c.order.filter((id) => !c.started.includes(id)).slice(0, free) : [];
}

/** Every install started has ended and nothing more will start. */
const settled = (c: BatchContext) => running(c) === 0 && (c.over_budget || c.started.length === c.order.length);

/** The context after an event with what it starts. */
function stepped(c: BatchContext, e: BatchEvent): { context: BatchContext; start: string[] } {
  const r = recorded(c, e);
  const start = next(r);
  return { context: start.length ? { ...r, started: [...r.started, ...start] } : r, start };
}

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
      return settled(s) && s.over_budget;
    },
    succeeds: ({ context, event }) => {
      const s = stepped(context, event).context;
      return settled(s) && !s.over_budget;
    },
    startsSome: ({ context, event }) => stepped(context, event).start.length > 0,
    news: ({ context, event }) => stepped(context, event).context !== context,
  },
  actions: {
    // emitted before the context moves on (emit reads the context as it was)
    emitStart: emit(({ context, event }) => ({ type: 'start' as const, install_ids: stepped(context, event).start })),
    emitSucceeded: emit(({ context, event }) => ({ type: 'succeeded' as const, failed_installs: stepped(context, event).context.failed })),
    emitFailed: emit(({ context, event }) => ({ type: 'failed' as const, failed_installs: stepped(context, event).context.failed })),
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
  }),
  states: {
    deploying: {
      on: {
        begin: [
          { guard: 'succeeds', target: 'succeeded', actions: ['emitSucceeded', 'step'] },
          { guard: 'startsSome', actions: ['emitStart', 'step'] },
        ],
        ended: [
          { guard: 'fails', target: 'failed', actions: ['emitFailed', 'step'] },
          { guard: 'succeeds', target: 'succeeded', actions: ['emitSucceeded', 'step'] },
          { guard: 'startsSome', actions: ['emitStart', 'step'] },
          { guard: 'news', actions: 'step' },
        ],
      },
    },
    // terminal: accept nothing
    succeeded: {},
    failed: {},
  },
});

export function initialDeployBatch(input: BatchInput): BatchSnapshot {
  return initial<BatchStatus, BatchContext>(deployBatchMachine, input);
}

export function advanceDeployBatch(state: BatchStatus, context: BatchContext, event: BatchEvent): Advanced<BatchStatus, BatchContext, BatchEmit> {
  return advance<BatchStatus, BatchContext, BatchEmit>(deployBatchMachine, state, context, event);
}

/** floor(size × max_failed_pct / 100): how many of a group's installs may fail (CONTRACT 4.3). */
export function failureBudget(size: number, maxFailedPct: number): number {
  return Math.floor((size * maxFailedPct) / 100);
}
