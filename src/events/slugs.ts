// Interest slugs of an event (spec 6.4, CONTRACT 6.2); each kind's are in kinds/.
import type { Fact } from '../domain/facts.ts';
import type { Classification } from './classify.ts';
import { kindOf } from './kinds/index.ts';

/** The `event:<...>` slug of a fact. */
export function eventSlug(fact: Fact): string {
  return kindOf(fact).slug(fact);
}

/** The `outcome:<...>` slugs of a fact. */
export function outcomeSlugs(fact: Fact): string[] {
  return kindOf(fact).outcomes(fact);
}

/**
 * resource:<r>, op:<r>.<op>, the event slug, then the outcome slugs. A direct kind (ping) carries
 * its event slug alone (and needs no classification).
 */
export function slugsFor(fact: Fact, cls: Classification | null): string[] {
  const k = kindOf(fact);
  if (k.direct) return [k.slug(fact)];
  const out: string[] = [];
  if (cls) out.push(`resource:${cls.resource}`, `op:${cls.resource}.${cls.op}`);
  out.push(k.slug(fact), ...k.outcomes(fact));
  return out;
}
