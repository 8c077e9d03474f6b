// Pure stepping of a persisted machine: rehydrate (status string + JSON context),
// compute the next snapshot with xstate's pure `transition()`, collect the
// payloads of `emit(...)` actions in order. No I/O, no timers, no clocks.
import { initialTransition, transition } from 'xstate';
import type { AnyStateMachine } from 'xstate';

export interface Advanced<S extends string, C, E> {
  state: S;
  context: C;
  /** payloads of the machine's `emit(...)` actions, in order (what the transition emits; the engine turns it into facts) */
  emitted: E[];
  /**
   * false when the event was not accepted in that state (ignored / repeated /
   * out-of-order input), and also when it was accepted but altered nothing at all
   * (same state, same context, nothing emitted). The engine counts such inputs
   * and never emits for them.
   */
  changed: boolean;
  /** true when the machine had an enabled transition for the event (even if it was a no-op) */
  accepted: boolean;
}

export type MachineInput = { type: string; [k: string]: unknown };

const EMIT_ACTION = 'xstate.emit';

function stateString(value: unknown): string {
  if (typeof value === 'string') return value;
  throw new Error(`machines: expected a flat state value, got ${JSON.stringify(value)}`);
}

/** Structural equality over small JSON values (key order insensitive). */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (a === null || b === null || typeof a !== 'object' || typeof b !== 'object') return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a) && Array.isArray(b)) {
    if (a.length !== b.length) return false;
    return a.every((v, i) => jsonEqual(v, b[i]));
  }
  const ao = a as Record<string, unknown>;
  const bo = b as Record<string, unknown>;
  const ak = Object.keys(ao).filter((k) => ao[k] !== undefined);
  const bk = Object.keys(bo).filter((k) => bo[k] !== undefined);
  if (ak.length !== bk.length) return false;
  return ak.every((k) => Object.hasOwn(bo, k) && jsonEqual(ao[k], bo[k]));
}

function collectEmitted<E>(actions: ReadonlyArray<{ type: string; params: unknown }>): E[] {
  const out: E[] = [];
  for (const a of actions) {
    if (a.type !== EMIT_ACTION) continue;
    const params = a.params as { event?: unknown } | undefined;
    if (params && params.event !== undefined) out.push(params.event as E);
  }
  return out;
}

/** The machine's initial {state, context}; `input` feeds a context factory (e.g. the step's `silent`). */
export function initial<S extends string = string, C = unknown>(machine: AnyStateMachine, input?: unknown): { state: S; context: C } {
  const [snapshot] = initialTransition(machine, input as never);
  return { state: stateString(snapshot.value) as S, context: snapshot.context as C };
}

/** A machine's two entry points, typed for it (what every machine module exports, by its own names). */
export interface MachineSteps<S extends string, C, Ev extends MachineInput, E, I> {
  /** the initial {state, context}, from `input` when the machine takes one */
  initial(input: I): { state: S; context: C };
  /** advance() on the machine */
  advance(state: S, context: C, event: Ev): Advanced<S, C, E>;
}

/**
 * initial() and advance() bound to one machine and typed for it: state S, context C, events Ev,
 * emitted payloads E, input I (none by default).
 */
export function machineSteps<S extends string, C, Ev extends MachineInput, E, I = void>(
  machine: AnyStateMachine,
): MachineSteps<S, C, Ev, E, I> {
  return {
    initial: (input) => initial<S, C>(machine, input),
    advance: (state, context, event) => advance<S, C, E>(machine, state, context, event),
  };
}

/** Results of advance() already computed, per machine: a transition is a pure function of its inputs. */
const memo = new WeakMap<AnyStateMachine, Map<string, Advanced<string, unknown, unknown>>>();
const MEMO_MAX = 10_000;

/**
 * Step a machine from (state, context) with an event. Pure, so the answer for the same inputs is
 * remembered: the engine steps the same few transitions (a workflow starting, a step succeeding,
 * a heartbeat) over and over, and xstate's transition() is the costly part of a fact. Every call
 * gets its own copies (the caller's context back when nothing changed).
 */
export function advance<S extends string, C, E>(
  machine: AnyStateMachine,
  state: S,
  context: C,
  event: { type: string; [k: string]: unknown },
): Advanced<S, C, E> {
  let cache = memo.get(machine);
  if (!cache) memo.set(machine, (cache = new Map()));
  const key = `${state}\u0000${JSON.stringify(context)}\u0000${JSON.stringify(event)}`;
  let r = cache.get(key) as Advanced<S, C, E> | undefined;
  if (!r) {
    r = step<S, C, E>(machine, state, context, event);
    if (cache.size >= MEMO_MAX) cache.clear();
    cache.set(key, { ...r, context: copyJson(r.context), emitted: r.emitted.map(copyJson) } as Advanced<string, unknown, unknown>);
    return r;
  }
  if (!r.changed) return { state, context, emitted: [], changed: false, accepted: r.accepted };
  return { state: r.state, context: copyJson(r.context), emitted: r.emitted.map(copyJson), changed: true, accepted: true };
}

/**
 * A deep copy of a JSON value (a machine's context and its emitted payloads are JSON: they are
 * persisted as such). structuredClone did the same at several times the cost, on every fact.
 */
function copyJson<T>(v: T): T {
  if (v === null || typeof v !== 'object') return v;
  if (Array.isArray(v)) return v.map(copyJson) as T;
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(v)) out[k] = copyJson((v as Record<string, unknown>)[k]);
  return out as T;
}

function step<S extends string, C, E>(
  machine: AnyStateMachine,
  state: S,
  context: C,
  event: { type: string; [k: string]: unknown },
): Advanced<S, C, E> {
  const snapshot = machine.resolveState({ value: state, context: context as never });
  const [next, actions] = transition(machine, snapshot, event as never);
  const nextState = stateString(next.value) as S;
  const nextContext = next.context as C;
  const emitted = collectEmitted<E>(actions as ReadonlyArray<{ type: string; params: unknown }>);
  const changed = nextState !== state || emitted.length > 0 || !jsonEqual(nextContext, context);
  if (changed) return { state: nextState, context: nextContext, emitted, changed, accepted: true };
  // nothing happened: was the event legal here at all (a no-op) or not (ignored)? Asked only now,
  // so the common path computes one transition, not two.
  return { state, context, emitted: [], changed: false, accepted: snapshot.can(event as never) };
}
