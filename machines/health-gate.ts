// A health gate's bake (CONTRACT 4.3 "Health-gated runs"): after a group of installs deploys, it
// watches their composite health verdicts for the bake time. A verdict named in `on` trips it
// (one already bad when the bake starts counts: the engine feeds the current verdicts first);
// reaching the end of the bake with none passes it. Pure: no I/O; time is the engine's, given in
// each event (`at`, milliseconds).
import { assign, emit, setup } from 'xstate';
import { z } from 'zod';
import { advance, initial } from './advance.ts';
import type { Advanced } from './advance.ts';
import type { KnownVerdict } from './health.ts';
import { GATE_VERDICTS, gateTripSchema, type GateTrip } from '../src/domain/rollout.ts';

export type { GateTrip };

export const GATE_STATUSES = ['baking', 'passed', 'tripped'] as const;
export type GateStatus = (typeof GATE_STATUSES)[number];

/**
 * A bake step's gate as the engine keeps it in the step's params (`gate`): the machine's state and
 * context. The one shape of it: the engine feeds it, the rollout view reads it (gateSnapshotOf).
 */
export const gateSnapshotSchema = z.object({
  state: z.enum(GATE_STATUSES),
  context: z.object({
    /** the verdicts that trip the gate */
    on: z.array(z.enum(GATE_VERDICTS)),
    /** when the bake ends (ms since the epoch, engine clock) */
    ends_at: z.number(),
    trip: gateTripSchema.nullable(),
  }),
});
export type GateSnapshot = z.infer<typeof gateSnapshotSchema>;
export type GateContext = GateSnapshot['context'];

/** The gate kept in a step's params; undefined when the step has none (not a bake, or not begun). */
export const gateSnapshotOf = (params: Record<string, unknown>): GateSnapshot | undefined =>
  params.gate === undefined ? undefined : gateSnapshotSchema.parse(params.gate);

export interface GateInput {
  on: GateContext['on'];
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
    ? { install_id: event.install_id, component_id: event.component_id, verdict: event.verdict as GateTrip['verdict'], reason: event.reason ?? null }
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

export function initialHealthGate(input: GateInput): GateSnapshot {
  return initial<GateStatus, GateContext>(healthGateMachine, input);
}

export function advanceHealthGate(state: GateStatus, context: GateContext, event: GateEvent): Advanced<GateStatus, GateContext, GateEmit> {
  return advance<GateStatus, GateContext, GateEmit>(healthGateMachine, state, context, event);
}
