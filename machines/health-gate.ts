// A health gate's bake (CONTRACT 4.3 "Health-gated runs"): after a group of installs deploys, it
// watches their composite health verdicts for the bake time. A verdict named in `on` trips it
// (one already bad when the bake starts counts: the engine feeds the current verdicts first);
// reaching the end of the bake with none passes it. Pure: no I/O; time is the engine's, given in
// each event (`at`, milliseconds).
import { assign, emit, setup } from 'xstate';
import { advance, initial } from './advance.ts';
import type { Advanced } from './advance.ts';
import type { KnownVerdict } from './health.ts';
import type { GateVerdict } from '../src/domain/rollout.ts';

export type GateStatus = 'baking' | 'passed' | 'tripped';

/** What tripped a gate: the install, the component behind its composite verdict, the verdict, the reason. */
export interface GateTrip {
  install_id: string;
  component_id: string;
  verdict: GateVerdict;
  reason: string | null;
}

export interface GateContext {
  /** the verdicts that trip the gate */
  on: GateVerdict[];
  /** when the bake ends (ms since the epoch, engine clock) */
  ends_at: number;
  trip: GateTrip | null;
}

export interface GateInput {
  on: GateVerdict[];
  ends_at: number;
}

export type GateEvent =
  /** an install's composite verdict now (a known verdict; the component behind it and its reason) */
  | { type: 'health'; install_id: string; component_id: string; verdict: KnownVerdict; reason?: string | null }
  /** the engine's clock now */
  | { type: 'tick'; at: number };

export type GateEmit = { type: 'tripped'; trip: GateTrip } | { type: 'passed' };

const tripOf = (event: GateEvent): GateTrip =>
  event.type === 'health'
    ? { install_id: event.install_id, component_id: event.component_id, verdict: event.verdict as GateVerdict, reason: event.reason ?? null }
    : (() => {
        throw new Error('health gate: a trip from a non-health event');
      })();

export const healthGateMachine = setup({
  types: {
    context: {} as GateContext,
    events: {} as GateEvent,
    input: {} as GateInput,
    emitted: {} as GateEmit,
  },
  guards: {
    watched: ({ context, event }) => event.type === 'health' && (context.on as string[]).includes(event.verdict),
    due: ({ context, event }) => event.type === 'tick' && event.at >= context.ends_at,
  },
}).createMachine({
  id: 'healthGate',
  initial: 'baking',
  context: ({ input }) => ({ on: [...input.on], ends_at: input.ends_at, trip: null }),
  states: {
    baking: {
      on: {
        health: {
          guard: 'watched',
          target: 'tripped',
          actions: [assign({ trip: ({ event }) => tripOf(event) }), emit(({ event }) => ({ type: 'tripped' as const, trip: tripOf(event) }))],
        },
        tick: { guard: 'due', target: 'passed', actions: emit({ type: 'passed' as const }) },
      },
    },
    // terminal: accept nothing
    passed: {},
    tripped: {},
  },
});

export function initialHealthGate(input: GateInput): { state: GateStatus; context: GateContext } {
  return initial<GateStatus, GateContext>(healthGateMachine, input);
}

export function advanceHealthGate(state: GateStatus, context: GateContext, event: GateEvent): Advanced<GateStatus, GateContext, GateEmit> {
  return advance<GateStatus, GateContext, GateEmit>(healthGateMachine, state, context, event);
}
