// Component and install health (spec 3 "Health verdicts", contract 5.2 "Health").
// Pure: no I/O, no clocks.
import { assign, emit, setup } from 'xstate';
import { machineSteps } from './advance.ts';
import type { Verdict } from '../src/domain/status.ts';

/** A verdict that is remembered: `unknown` never is (the last known verdict stands). */
export type KnownVerdict = Exclude<Verdict, 'unknown'>;
export type HealthStatus = 'ok' | 'bad';

export const HEALTH_STATUSES: readonly HealthStatus[] = ['ok', 'bad'];

const SEVERITY: Record<KnownVerdict, number> = { healthy: 0, degraded: 1, unhealthy: 2 };

export function isKnownVerdict(v: unknown): v is KnownVerdict {
  return v === 'healthy' || v === 'degraded' || v === 'unhealthy';
}

export function isBadVerdict(v: unknown): v is 'degraded' | 'unhealthy' {
  return v === 'degraded' || v === 'unhealthy';
}

/** Worst of the known verdicts (healthy < degraded < unhealthy); null when there are none. */
export function worstVerdict(verdicts: Iterable<KnownVerdict>): KnownVerdict | null {
  let worst: KnownVerdict | null = null;
  for (const v of verdicts) {
    if (!isKnownVerdict(v)) continue;
    if (worst === null || SEVERITY[v] > SEVERITY[worst]) worst = v;
  }
  return worst;
}

/** The install's composite verdict: the worst last-known verdict of its components. */
export function compositeVerdict(verdicts: Record<string, KnownVerdict>): KnownVerdict | null {
  return worstVerdict(Object.values(verdicts));
}

/**
 * The two states of a health machine on `verdict` events: from ok, a verdict that passes the guard
 * `toBad` goes to bad, emitting the machine's `worse` fact; from bad, one that passes `toOk` goes
 * back to ok, emitting `better`; each fact is emitted before `record` keeps the verdict. Any other
 * known verdict is only recorded; an unknown one has no transition (not accepted).
 */
function okAndBad<G extends string>(toBad: G, toOk: G) {
  return {
    ok: { on: { verdict: [{ guard: toBad, target: 'bad', actions: ['worse', 'record'] }, KEEP] } },
    bad: { on: { verdict: [{ guard: toOk, target: 'ok', actions: ['better', 'record'] }, KEEP] } },
  } as const;
}

const KEEP = { guard: 'known', actions: 'record' } as const;

// ---------------------------------------------------------------------------
// component

export interface ComponentHealthContext {
  /** last known verdict (null before any) */
  verdict: KnownVerdict | null;
}

export type ComponentHealthEvent = { type: 'verdict'; verdict: Verdict; reason?: string };

export type ComponentHealthEmit =
  | { type: 'unhealthy'; verdict: 'degraded' | 'unhealthy'; previous: KnownVerdict | null; reason?: string }
  | { type: 'recovered'; verdict: 'healthy'; previous: KnownVerdict | null; reason?: string };

function componentFact(type: 'unhealthy' | 'recovered', context: ComponentHealthContext, event: ComponentHealthEvent): ComponentHealthEmit {
  const fact = { type, verdict: event.verdict, previous: context.verdict } as ComponentHealthEmit;
  if (typeof event.reason === 'string') fact.reason = event.reason;
  return fact;
}

export const componentHealthMachine = setup({
  types: {
    context: {} as ComponentHealthContext,
    events: {} as ComponentHealthEvent,
    emitted: {} as ComponentHealthEmit,
  },
  guards: {
    known: ({ event }) => isKnownVerdict(event.verdict),
    bad: ({ event }) => isBadVerdict(event.verdict),
    healthy: ({ event }) => event.verdict === 'healthy',
  },
  actions: {
    worse: emit(({ context, event }) => componentFact('unhealthy', context, event)),
    better: emit(({ context, event }) => componentFact('recovered', context, event)),
    // emit actions run before this one, so they see the previous verdict
    record: assign({ verdict: ({ event }) => (isKnownVerdict(event.verdict) ? event.verdict : null) }),
  },
}).createMachine({
  id: 'componentHealth',
  initial: 'ok',
  context: { verdict: null },
  states: okAndBad('bad', 'healthy'),
});

export const { initial: initialComponentHealth, advance: advanceComponentHealth } = machineSteps<
  HealthStatus,
  ComponentHealthContext,
  ComponentHealthEvent,
  ComponentHealthEmit
>(componentHealthMachine);

// ---------------------------------------------------------------------------
// install (composite over its components)

export interface InstallHealthContext {
  /** last known verdict per component_id */
  verdicts: Record<string, KnownVerdict>;
}

export type InstallHealthEvent = { type: 'verdict'; component_id: string; verdict: Verdict; reason?: string };

export type InstallHealthEmit =
  | { type: 'degraded'; verdict: 'degraded' | 'unhealthy'; previous: KnownVerdict | null; component_id: string }
  | { type: 'recovered'; verdict: 'healthy'; previous: KnownVerdict | null; component_id: string };

function withVerdict(context: InstallHealthContext, event: InstallHealthEvent): Record<string, KnownVerdict> {
  if (!isKnownVerdict(event.verdict)) return context.verdicts;
  return { ...context.verdicts, [event.component_id]: event.verdict };
}

function nextComposite(context: InstallHealthContext, event: InstallHealthEvent): KnownVerdict | null {
  return compositeVerdict(withVerdict(context, event));
}

function installFact(type: 'degraded' | 'recovered', context: InstallHealthContext, event: InstallHealthEvent): InstallHealthEmit {
  return {
    type,
    verdict: nextComposite(context, event),
    previous: compositeVerdict(context.verdicts),
    component_id: event.component_id,
  } as InstallHealthEmit;
}

export const installHealthMachine = setup({
  types: {
    context: {} as InstallHealthContext,
    events: {} as InstallHealthEvent,
    emitted: {} as InstallHealthEmit,
  },
  guards: {
    known: ({ event }) => isKnownVerdict(event.verdict) && typeof event.component_id === 'string',
    compositeBad: ({ context, event }) => isKnownVerdict(event.verdict) && isBadVerdict(nextComposite(context, event)),
    compositeHealthy: ({ context, event }) => isKnownVerdict(event.verdict) && nextComposite(context, event) === 'healthy',
  },
  actions: {
    worse: emit(({ context, event }) => installFact('degraded', context, event)),
    better: emit(({ context, event }) => installFact('recovered', context, event)),
    // emit actions run before this one, so they see the previous composite
    record: assign({ verdicts: ({ context, event }) => withVerdict(context, event) }),
  },
}).createMachine({
  id: 'installHealth',
  initial: 'ok',
  context: { verdicts: {} },
  states: okAndBad('compositeBad', 'compositeHealthy'),
});

export const { initial: initialInstallHealth, advance: advanceInstallHealth } = machineSteps<
  HealthStatus,
  InstallHealthContext,
  InstallHealthEvent,
  InstallHealthEmit
>(installHealthMachine);
