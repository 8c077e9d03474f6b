// Interest slugs of an event (spec 6.4, CONTRACT 6.2).
import type { Fact } from '../domain/facts.ts';
import type { Classification } from './classify.ts';

const TERMINAL: ReadonlySet<string> = new Set(['succeeded', 'failed', 'cancelled']);

/** The `event:<...>` slug of a fact. */
export function eventSlug(fact: Fact): string {
  switch (fact.kind) {
    case 'workflow':
    case 'workflow_step':
      return `event:lifecycle.${fact.transition}`;
    case 'workflow_step_approval':
      return fact.transition === 'requested' ? 'event:approval.request' : `event:approval.response.${fact.transition}`;
    case 'drift_detected':
      return 'event:drift.detected';
    case 'component_health':
      return `event:component.${fact.transition}`;
    case 'install_health':
      return `event:install.${fact.transition}`;
    case 'runner_unhealthy':
      return 'event:runner.unhealthy';
    case 'runner_inactive':
      return 'event:runner.inactive';
    case 'webhook_ping':
      return 'event:webhook.ping';
    case 'webhook_delivery':
      return `event:webhook.${fact.transition}`;
  }
}

/** The `outcome:<...>` slugs of a fact. */
export function outcomeSlugs(fact: Fact): string[] {
  if (fact.kind === 'runner_unhealthy') return ['outcome:completion', 'outcome:failures'];
  if (fact.kind !== 'workflow' && fact.kind !== 'workflow_step') return [];
  if (!TERMINAL.has(fact.transition)) return [];
  return fact.transition === 'succeeded' ? ['outcome:completion'] : ['outcome:completion', 'outcome:failures'];
}

/**
 * resource:<r>, op:<r>.<op>, the event slug, then the outcome slugs. Ping carries
 * `event:webhook.ping` alone (and needs no classification).
 */
export function slugsFor(fact: Fact, cls: Classification | null): string[] {
  if (fact.kind === 'webhook_ping') return ['event:webhook.ping'];
  const out: string[] = [];
  if (cls) out.push(`resource:${cls.resource}`, `op:${cls.resource}.${cls.op}`);
  out.push(eventSlug(fact), ...outcomeSlugs(fact));
  return out;
}
