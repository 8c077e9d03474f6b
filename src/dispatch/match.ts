// Match predicate of a webhook against the entities of an event (spec 2.3, CONTRACT 6.3).
import type { EventRoute, RouteEntity } from '../domain/event-route.ts';
import { MATCH_KINDS, type Match, type MatchFilter, type MatchKind } from '../domain/subscription.ts';

/** An entity of an event (labels null: unknown to the event's org, matched by id only). */
export type Entity = RouteEntity;

/** The entities `match` tests: those of the route (an absent one is null or left out). */
export type EventEntities = Partial<Pick<EventRoute, 'install' | 'component' | 'action'>>;

const ENTITY_OF: Record<MatchKind, keyof EventEntities> = { installs: 'install', components: 'component', actions: 'action' };

/** Every match_labels entry must match; the value '*' only requires the key. */
function labelsSatisfy(labels: Record<string, string>, want: Record<string, string>): boolean {
  return Object.entries(want).every(([k, v]) => Object.hasOwn(labels, k) && (v === '*' || labels[k] === v));
}

function filterAdmits(f: MatchFilter, e: Entity): boolean {
  if (f.ids === undefined && f.selector === undefined) return true; // {} = any entity of the kind
  if (f.ids?.includes(e.id)) return true;
  return f.selector !== undefined && e.labels !== null && labelsSatisfy(e.labels, f.selector.match_labels);
}

/**
 * Whether a match admits an event: null admits all; otherwise any populated kind must match an
 * entity of that kind present on the event (an absent entity never matches, not even `{}`).
 */
export function matchAdmits(match: Match | null, entities: EventEntities): boolean {
  if (match === null || match === undefined) return true;
  return MATCH_KINDS.some((kind) => {
    const f = match[kind];
    const e = entities[ENTITY_OF[kind]];
    return f !== undefined && e !== null && e !== undefined && filterAdmits(f, e);
  });
}
