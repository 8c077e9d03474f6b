// Interests filter of a webhook against a routed event (spec 2.2, CONTRACT 6.3).
import type { Interests, ResourceConfig } from '../domain/subscription.ts';

/** What the interests filter needs of an event, read from its slugs (CONTRACT 6.2). */
export interface RoutedEvent {
  /** `resource:<r>` */
  resource: string;
  /** the part after the dot of `op:<r>.<op>` */
  op: string;
  /** `event:<...>` without the prefix, e.g. 'lifecycle.started', 'approval.request' */
  event: string;
}

/**
 * Route of an event from its interest slugs. Ping (`event:webhook.ping` alone) routes with empty
 * resource and op. null when the event slug is missing, or resource/op are missing or disagree.
 */
export function routeFromSlugs(slugs: string[]): RoutedEvent | null {
  let resource: string | null = null;
  let opSlug: string | null = null;
  let event: string | null = null;
  for (const s of slugs) {
    if (resource === null && s.startsWith('resource:')) resource = s.slice('resource:'.length);
    else if (opSlug === null && s.startsWith('op:')) opSlug = s.slice('op:'.length);
    else if (event === null && s.startsWith('event:')) event = s.slice('event:'.length);
  }
  if (!event) return null;
  if (event === 'webhook.ping' && resource === null && opSlug === null) return { resource: '', op: '', event };
  if (!resource || !opSlug) return null;
  const dot = opSlug.indexOf('.');
  if (dot < 0 || opSlug.slice(0, dot) !== resource) return null;
  const op = opSlug.slice(dot + 1);
  return op ? { resource, op, event } : null;
}

const opAdmitted = (cfg: ResourceConfig, op: string): boolean => !cfg.ops || cfg.ops.length === 0 || cfg.ops.includes(op);

/** Outcome rule of spec 2.2 for a lifecycle transition. */
function outcomeAdmits(outcome: ResourceConfig['outcome'], transition: string): boolean {
  const o = outcome ?? 'all';
  switch (transition) {
    case 'started':
      return o === 'all';
    case 'succeeded':
      return o === 'all' || o === 'completion';
    case 'failed':
    case 'cancelled':
      return o !== 'none';
    default:
      return false;
  }
}

/** Whether a webhook's interests admit an event. */
export function interestsAdmit(interests: Interests, ev: RoutedEvent): boolean {
  if (interests.all_events === true) return true;
  const resources = interests.resources;
  if (!resources || !Object.hasOwn(resources, ev.resource)) return false;
  const cfg = (resources as Record<string, ResourceConfig | undefined>)[ev.resource];
  if (!cfg) return false;
  const outcome = cfg.outcome ?? 'all';

  if (ev.event.startsWith('lifecycle.')) {
    return opAdmitted(cfg, ev.op) && outcomeAdmits(outcome, ev.event.slice('lifecycle.'.length));
  }
  if (ev.event.startsWith('approval.response.')) return cfg.approval_responses === true;
  if (ev.event.startsWith('component.')) return ev.resource === 'components' && cfg.component_health === true;
  if (ev.event.startsWith('install.')) return ev.resource === 'installs' && cfg.install_degraded === true;
  switch (ev.event) {
    case 'approval.request':
      return cfg.approval_requests === true;
    case 'drift.detected':
      return (ev.resource === 'components' || ev.resource === 'sandboxes') && cfg.drift_detected === true;
    case 'runner.unhealthy':
      return opAdmitted(cfg, 'unhealthy') && outcome !== 'none';
    case 'runner.inactive':
      return opAdmitted(cfg, 'inactive') && (outcome === 'all' || outcome === 'completion');
    default:
      return false;
  }
}
