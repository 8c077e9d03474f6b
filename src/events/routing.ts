// The route of a fact's event (src/domain/event-route.ts), computed once, where the event is emitted.
import type { EventRoute, RouteEntity, Labels } from '../domain/event-route.ts';
import type { Fact } from '../domain/facts.ts';
import type { Classification } from './classify.ts';
import { kindOf } from './kinds/index.ts';

/** Labels of an entity of the event's own org; null when the org has no such entity (CONTRACT 6.7). */
export interface LabelLookup {
  install(orgId: string, id: string): Labels | null;
  component(orgId: string, id: string): Labels | null;
  action(orgId: string, id: string): Labels | null;
}

export function routeOf(
  fact: Fact,
  type: string,
  cls: Classification | null,
  labels: LabelLookup,
  rev: number,
  key: string | null = null,
): EventRoute {
  const org = fact.org_id;
  const k = kindOf(fact);
  const m = k.match(fact);
  const entity = (id: string | undefined, find: (o: string, i: string) => Labels | null): RouteEntity | null =>
    id === undefined ? null : { id, labels: find(org, id) };
  return {
    org,
    type,
    resource: cls?.resource ?? '',
    op: cls?.op ?? '',
    event: k.slug(fact).slice('event:'.length),
    install: entity(m.install, labels.install),
    component: entity(m.component, labels.component),
    action: entity(m.action, labels.action),
    rev,
    ...(m.not_to !== undefined ? { not_to: m.not_to } : {}),
    ...(key !== null ? { key } : {}),
  };
}
