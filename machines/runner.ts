// Runner health (spec 3 "Runner", contract 5.1 / 5.2 runner health check).
// Pure: the periodic `check` tick and all time come from the engine.
import { assign, emit, setup } from 'xstate';
import { machineSteps } from './advance.ts';
import type { RunnerState } from '../src/domain/status.ts';

/** The runner's health state (CONTRACT 5.1). */
export type RunnerStatus = RunnerState;
export type RunnerProcess = 'running' | 'missing';

export interface RunnerContext {
  /** a `running` heartbeat arrived since the previous health check */
  heartbeatSinceCheck: boolean;
  /** what the last heartbeat said (null before any) */
  lastProcess: RunnerProcess | null;
}

export type RunnerEvent = { type: 'heartbeat'; process: RunnerProcess } | { type: 'check' } | { type: 'inactive'; reason?: string };

export const RUNNER_REASON_NO_HEARTBEAT = 'no heartbeat since the last health check';
export const RUNNER_REASON_PROCESS_MISSING = 'runner process missing';

export type RunnerEmit = { type: 'unhealthy'; reason: string } | { type: 'inactive'; reason?: string };

function inactiveFact(event: RunnerEvent): RunnerEmit {
  return event.type === 'inactive' && typeof event.reason === 'string' ? { type: 'inactive', reason: event.reason } : { type: 'inactive' };
}

export const runnerMachine = setup({
  types: {
    context: {} as RunnerContext,
    events: {} as RunnerEvent,
    emitted: {} as RunnerEmit,
  },
  guards: {
    running: ({ event }) => event.type === 'heartbeat' && event.process === 'running',
    missing: ({ event }) => event.type === 'heartbeat' && event.process === 'missing',
    processMissing: ({ context }) => context.lastProcess === 'missing',
    noHeartbeat: ({ context }) => !context.heartbeatSinceCheck,
  },
  actions: {
    recordRunning: assign({ heartbeatSinceCheck: true, lastProcess: 'running' as RunnerProcess }),
    recordMissing: assign({ lastProcess: 'missing' as RunnerProcess }),
    resetCheck: assign({ heartbeatSinceCheck: false }),
    emitInactive: emit(({ event }) => inactiveFact(event)),
  },
}).createMachine({
  id: 'runner',
  initial: 'pending',
  context: { heartbeatSinceCheck: false, lastProcess: null },
  on: {
    // in every state: emits, never changes the health state
    inactive: { actions: 'emitInactive' },
  },
  states: {
    pending: {
      on: {
        heartbeat: [
          { guard: 'running', target: 'active', actions: 'recordRunning' },
          { guard: 'missing', actions: 'recordMissing' },
        ],
        // check: nothing (a pending runner has no health yet)
      },
    },
    active: {
      on: {
        heartbeat: [
          { guard: 'running', actions: 'recordRunning' },
          { guard: 'missing', actions: 'recordMissing' },
        ],
        check: [
          {
            guard: 'processMissing',
            target: 'offline',
            actions: [emit({ type: 'unhealthy', reason: RUNNER_REASON_PROCESS_MISSING }), 'resetCheck'],
          },
          {
            guard: 'noHeartbeat',
            target: 'offline',
            actions: [emit({ type: 'unhealthy', reason: RUNNER_REASON_NO_HEARTBEAT }), 'resetCheck'],
          },
          { actions: 'resetCheck' },
        ],
      },
    },
    offline: {
      on: {
        heartbeat: [
          { guard: 'running', target: 'active', actions: 'recordRunning' },
          { guard: 'missing', actions: 'recordMissing' },
        ],
        // check: nothing (one event per outage)
      },
    },
  },
});

export const { initial: initialRunner, advance: advanceRunner } = machineSteps<RunnerStatus, RunnerContext, RunnerEvent, RunnerEmit>(
  runnerMachine,
);
