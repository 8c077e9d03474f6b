// Workflow step lifecycle (spec 3, contract 4.2 / 5). Pure: no I/O, no clocks.
import { enqueueActions, setup } from 'xstate';
import { machineSteps } from './advance.ts';
import type { StepStatus } from '../src/domain/status.ts';

export type { StepStatus };

export interface StepContext {
  /** true for execution_type hidden / skipped: state changes, nothing is emitted */
  silent: boolean;
}

export interface StepInput {
  silent?: boolean;
}

export type StepEvent =
  | { type: 'start' }
  | { type: 'succeed' }
  | { type: 'fail'; error?: string }
  | { type: 'cancel' }
  | { type: 'skip' }
  | { type: 'request_approval' }
  | { type: 'approve' }
  | { type: 'reject'; error?: string }
  /** an approval policy's expires_after has passed (CONTRACT 10.4): the step fails approval_expired */
  | { type: 'expire' };

export type StepLifecycleEmit = {
  type: 'lifecycle';
  transition: 'started' | 'succeeded' | 'failed' | 'cancelled';
  error?: string;
};
export type StepApprovalEmit = { type: 'approval'; transition: 'requested' | 'approved' | 'rejected' | 'expired' };
export type StepEmit = StepLifecycleEmit | StepApprovalEmit;

const started: StepEmit = { type: 'lifecycle', transition: 'started' };
const succeeded: StepEmit = { type: 'lifecycle', transition: 'succeeded' };
const cancelled: StepEmit = { type: 'lifecycle', transition: 'cancelled' };

function failed(error: string | undefined): StepEmit {
  return error === undefined ? { type: 'lifecycle', transition: 'failed' } : { type: 'lifecycle', transition: 'failed', error };
}

function errorOf(event: StepEvent): string | undefined {
  return 'error' in event && typeof event.error === 'string' ? event.error : undefined;
}

export const stepMachine = setup({
  types: {
    context: {} as StepContext,
    events: {} as StepEvent,
    input: {} as StepInput | undefined,
    emitted: {} as StepEmit,
  },
  actions: {
    emits: enqueueActions(({ context, enqueue }, params: { emits: StepEmit[] }) => {
      if (context.silent) return;
      for (const f of params.emits) enqueue.emit({ ...f });
    }),
  },
}).createMachine({
  id: 'step',
  initial: 'pending',
  context: ({ input }) => ({ silent: input?.silent ?? false }),
  states: {
    pending: {
      on: {
        start: { target: 'started', actions: { type: 'emits', params: { emits: [started] } } },
        succeed: { target: 'succeeded', actions: { type: 'emits', params: { emits: [started, succeeded] } } },
        fail: {
          target: 'failed',
          actions: { type: 'emits', params: ({ event }) => ({ emits: [started, failed(errorOf(event))] }) },
        },
        cancel: { target: 'cancelled' },
        skip: { target: 'skipped' },
        request_approval: {
          target: 'awaiting_approval',
          actions: {
            type: 'emits',
            params: { emits: [started, { type: 'approval', transition: 'requested' }] },
          },
        },
      },
    },
    started: {
      on: {
        succeed: { target: 'succeeded', actions: { type: 'emits', params: { emits: [succeeded] } } },
        fail: {
          target: 'failed',
          actions: { type: 'emits', params: ({ event }) => ({ emits: [failed(errorOf(event))] }) },
        },
        cancel: { target: 'cancelled', actions: { type: 'emits', params: { emits: [cancelled] } } },
      },
    },
    awaiting_approval: {
      on: {
        approve: {
          target: 'succeeded',
          actions: {
            type: 'emits',
            params: { emits: [{ type: 'approval', transition: 'approved' }, succeeded] },
          },
        },
        reject: {
          target: 'failed',
          actions: {
            type: 'emits',
            params: ({ event }) => ({
              emits: [{ type: 'approval', transition: 'rejected' }, failed(errorOf(event) ?? 'rejected')],
            }),
          },
        },
        expire: {
          target: 'failed',
          actions: { type: 'emits', params: { emits: [{ type: 'approval', transition: 'expired' }, failed('approval_expired')] } },
        },
        cancel: { target: 'cancelled', actions: { type: 'emits', params: { emits: [cancelled] } } },
      },
    },
    // terminal: accept nothing
    skipped: {},
    succeeded: {},
    failed: {},
    cancelled: {},
  },
});

/** initialStep(input?): the step's `silent` from its input (false without one). */
export const { initial: initialStep, advance: advanceStep } = machineSteps<StepStatus, StepContext, StepEvent, StepEmit, StepInput | void>(
  stepMachine,
);
