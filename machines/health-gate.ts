// A health gate's bake (CONTRACT 4.3 "Health-gated runs"): after a group of installs deploys, it
// watches their composite health verdicts for the bake time. A verdict named in `on` trips it
// (one already bad when the bake starts counts: the engine feeds the current verdicts first);
// reaching the end of the bake with none passes it. With `for` (CONTRACT 4.3 "Rollout policy"), a
// bad verdict trips only once it has stayed bad that long: the install's streak (its first bad
// verdict's time, from the same component) ends with any verdict not in `on` or a bad one of
// another component (which starts a streak of its own); a bake whose time is up while a streak is
// still running waits for it to end (pass) or to last `for` (trip). Pure: no I/O; time is the
// engine's, given in each event (`at`, milliseconds).
import { assign, emit, setup } from 'xstate';
import { z } from 'zod';
import { machineSteps } from './advance.ts';
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
    /** how long a bad verdict must stay bad to trip (0: at once) */
    for_ms: z.number().default(0),
    /** per install, its running streak of bad verdicts: since when, and what it would trip with */
    streaks: z.record(z.string(), z.object({ since: z.number(), trip: gateTripSchema })).default({}),
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
  for_ms?: number;
}

export type GateEvent =
  /** an install's composite verdict at `at` (a known verdict; the component behind it and its reason) */
  | { type: 'health'; install_id: string; component_id: string; verdict: KnownVerdict; reason?: string | null; at: number }
  /** the engine's clock now */
  | { type: 'tick'; at: number };

export type GateEmit = { type: 'tripped'; trip: GateTrip } | { type: 'passed' };

type Streaks = GateContext['streaks'];

const isWatched = (context: GateContext, event: GateEvent): boolean =>
  event.type === 'health' && (context.on as string[]).includes(event.verdict);

/** The streaks after `event`: a bad verdict starts or continues its install's, any other ends it. */
function streaksAfter(context: GateContext, event: GateEvent): Streaks {
  if (event.type !== 'health') return context.streaks;
  const { [event.install_id]: running, ...others } = context.streaks;
  if (!isWatched(context, event)) return others;
  if (running && running.trip.component_id === event.component_id) return context.streaks;
  const trip: GateTrip = {
    install_id: event.install_id,
    component_id: event.component_id,
    verdict: event.verdict as GateTrip['verdict'],
    reason: event.reason ?? null,
  };
  return { ...others, [event.install_id]: { since: event.at, trip } };
}

/** The streak that has lasted `for` by `at` (the oldest), if any. */
function matured(streaks: Streaks, forMs: number, at: number): GateTrip | null {
  let oldest: { since: number; trip: GateTrip } | null = null;
  for (const s of Object.values(streaks)) if (at - s.since >= forMs && (!oldest || s.since < oldest.since)) oldest = s;
  return oldest?.trip ?? null;
}

/** What `event` trips the gate with, if it does. */
function tripBy(context: GateContext, event: GateEvent): GateTrip | null {
  return matured(streaksAfter(context, event), context.for_ms, event.at);
}

export const healthGateMachine = setup({
  types: {
    context: {} as GateContext,
    events: {} as GateEvent,
    input: {} as GateInput,
    emitted: {} as GateEmit,
  },
  guards: {
    trips: ({ context, event }) => tripBy(context, event) !== null,
    /** the bake's time is up and no streak runs */
    due: ({ context, event }) => event.at >= context.ends_at && Object.keys(streaksAfter(context, event)).length === 0,
  },
  actions: {
    trip: assign(({ context, event }) => ({ streaks: streaksAfter(context, event), trip: tripBy(context, event) })),
    emitTrip: emit(({ context, event }) => ({ type: 'tripped' as const, trip: tripBy(context, event)! })),
    follow: assign(({ context, event }) => ({ streaks: streaksAfter(context, event) })),
  },
}).createMachine({
  id: 'healthGate',
  initial: 'baking',
  context: ({ input }) => ({ on: [...input.on], ends_at: input.ends_at, trip: null, for_ms: input.for_ms ?? 0, streaks: {} }),
  states: {
    baking: {
      on: {
        // the trip is computed before the context changes (emitTrip first)
        health: [
          { guard: 'trips', target: 'tripped', actions: ['emitTrip', 'trip'] },
          { guard: 'due', target: 'passed', actions: ['follow', emit({ type: 'passed' as const })] },
          { actions: 'follow' },
        ],
        tick: [
          { guard: 'trips', target: 'tripped', actions: ['emitTrip', 'trip'] },
          { guard: 'due', target: 'passed', actions: emit({ type: 'passed' as const }) },
        ],
      },
    },
    // terminal: accept nothing
    passed: {},
    tripped: {},
  },
});

export const { initial: initialHealthGate, advance: advanceHealthGate } = machineSteps<
  GateStatus,
  GateContext,
  GateEvent,
  GateEmit,
  GateInput
>(healthGateMachine);
