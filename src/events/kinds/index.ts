// The event kinds, by kind (issue 50): a Record over every `Fact['kind']`, so that a kind without
// its entry here does not compile. A new kind is its fact in domain/facts.ts, one file of this
// folder, and its line below.
import type { Fact } from '../../domain/facts.ts';
import type { EventKind, FactOf } from './kind.ts';
import { component_health } from './component_health.ts';
import { drift_detected } from './drift_detected.ts';
import { install_health } from './install_health.ts';
import { runner_inactive } from './runner_inactive.ts';
import { runner_unhealthy } from './runner_unhealthy.ts';
import { webhook_delivery } from './webhook_delivery.ts';
import { webhook_ping } from './webhook_ping.ts';
import { workflow } from './workflow.ts';
import { workflow_step } from './workflow_step.ts';
import { workflow_step_approval } from './workflow_step_approval.ts';

export type { EventKind, EventRoutes, FactOf, Classification, LinkTargets, MatchTargets } from './kind.ts';

/** Each kind's entry, typed by its own fact: `Record<Fact['kind'], EventKind>` with every value exact. */
export type EventKinds = { readonly [K in Fact['kind']]: EventKind<FactOf<K>> };

export const KINDS: EventKinds = {
  workflow,
  workflow_step,
  workflow_step_approval,
  drift_detected,
  component_health,
  install_health,
  runner_unhealthy,
  runner_inactive,
  webhook_ping,
  webhook_delivery,
};

/** The kind of a fact, taking any fact (what the event modules call). */
export function kindOf(fact: Fact): EventKind {
  return KINDS[fact.kind];
}
