// Workflow lifecycle (spec 3, contract 5). Pure: no I/O, no clocks.
import { emit, setup } from 'xstate';
import { machineSteps } from './advance.ts';
import { isFinal, type RunOutcome, type StepStatus, type WorkflowStatus } from '../src/domain/status.ts';

export type { WorkflowStatus };

/** The workflow machine keeps no data of its own: its status is the whole state. */
export type WorkflowContext = Record<string, never>;

export type WorkflowEvent = { type: 'start' } | { type: 'finish'; outcome: RunOutcome; error?: string; stepStatuses: StepStatus[] };

export type WorkflowEmit = {
  type: 'lifecycle';
  transition: 'started' | RunOutcome;
  error?: string;
};

/**
 * The workflow's outcome from its steps' statuses: null while any step is not
 * terminal; failed if any failed; cancelled if any cancelled and none failed;
 * else succeeded (skipped steps count as done).
 */
export function workflowOutcome(stepStatuses: readonly StepStatus[]): RunOutcome | null {
  if (!stepStatuses.every(isFinal)) return null;
  if (stepStatuses.includes('failed')) return 'failed';
  if (stepStatuses.includes('cancelled')) return 'cancelled';
  return 'succeeded';
}

function terminalFact(event: WorkflowEvent): WorkflowEmit {
  if (event.type !== 'finish') throw new Error('workflow: terminal fact from a non-finish event');
  return event.error === undefined
    ? { type: 'lifecycle', transition: event.outcome }
    : { type: 'lifecycle', transition: event.outcome, error: event.error };
}

export const workflowMachine = setup({
  types: {
    context: {} as WorkflowContext,
    events: {} as WorkflowEvent,
    emitted: {} as WorkflowEmit,
  },
  guards: {
    /** accepted only with this outcome and once every step is terminal */
    finishable: ({ event }, params: { outcome: RunOutcome }) =>
      event.type === 'finish' && event.outcome === params.outcome && Array.isArray(event.stepStatuses) && event.stepStatuses.every(isFinal),
  },
}).createMachine({
  id: 'workflow',
  initial: 'pending',
  context: {},
  states: {
    pending: {
      on: {
        start: { target: 'started', actions: emit({ type: 'lifecycle', transition: 'started' }) },
        finish: [
          {
            guard: { type: 'finishable', params: { outcome: 'succeeded' } },
            target: 'succeeded',
            actions: [emit({ type: 'lifecycle', transition: 'started' }), emit(({ event }) => terminalFact(event))],
          },
          {
            guard: { type: 'finishable', params: { outcome: 'failed' } },
            target: 'failed',
            actions: [emit({ type: 'lifecycle', transition: 'started' }), emit(({ event }) => terminalFact(event))],
          },
          {
            guard: { type: 'finishable', params: { outcome: 'cancelled' } },
            target: 'cancelled',
            actions: [emit({ type: 'lifecycle', transition: 'started' }), emit(({ event }) => terminalFact(event))],
          },
        ],
      },
    },
    started: {
      on: {
        finish: [
          {
            guard: { type: 'finishable', params: { outcome: 'succeeded' } },
            target: 'succeeded',
            actions: emit(({ event }) => terminalFact(event)),
          },
          {
            guard: { type: 'finishable', params: { outcome: 'failed' } },
            target: 'failed',
            actions: emit(({ event }) => terminalFact(event)),
          },
          {
            guard: { type: 'finishable', params: { outcome: 'cancelled' } },
            target: 'cancelled',
            actions: emit(({ event }) => terminalFact(event)),
          },
        ],
      },
    },
    // terminal: accept nothing
    succeeded: {},
    failed: {},
    cancelled: {},
  },
});

export const { initial: initialWorkflow, advance: advanceWorkflow } = machineSteps<
  WorkflowStatus,
  WorkflowContext,
  WorkflowEvent,
  WorkflowEmit
>(workflowMachine);
