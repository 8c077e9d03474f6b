// Interests filter of a webhook against a routed event (spec 2.2, CONTRACT 6.3).
import type { EventRoute } from '../domain/event-route.ts';
import { flagApplies, type Interests, type ResourceConfig } from '../domain/subscription.ts';

/** What the interests filter needs of an event: its classification and event slug (src/domain/event-route.ts). */
export type RoutedEvent = Pick<EventRoute, 'resource' | 'op' | 'event'>;

/** The flag each watchdog event needs (CONTRACT 4.1): `enabled` follows `delivery_disabled`. */
const DELIVERY_FLAGS: Readonly<Record<string, 'delivery_failing' | 'delivery_recovered' | 'delivery_disabled'>> = {
  'webhook.failing': 'delivery_failing',
  'webhook.recovered': 'delivery_recovered',
  'webhook.disabled': 'delivery_disabled',
  'webhook.enabled': 'delivery_disabled',
};

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

/**
 * Whether a webhook's interests admit an event. `implicit`: none were given (they read as
 * all_events): the watchdog's events are not for it (src/domain/webhook-entry.ts).
 */
export function interestsAdmit(interests: Interests, ev: RoutedEvent, implicit = false): boolean {
  if (interests.all_events === true) return !(implicit && ev.event.startsWith('webhook.'));
  const resources = interests.resources;
  if (!resources || !Object.hasOwn(resources, ev.resource)) return false;
  const cfg = (resources as Record<string, ResourceConfig | undefined>)[ev.resource];
  if (!cfg) return false;
  const outcome = cfg.outcome ?? 'all';

  if (ev.event.startsWith('lifecycle.')) {
    return opAdmitted(cfg, ev.op) && outcomeAdmits(outcome, ev.event.slice('lifecycle.'.length));
  }
  if (ev.event.startsWith('approval.response.')) return cfg.approval_responses === true;
  if (ev.event.startsWith('component.')) return flagApplies('component_health', ev.resource) && cfg.component_health === true;
  if (ev.event.startsWith('install.')) return flagApplies('install_degraded', ev.resource) && cfg.install_degraded === true;
  if (ev.event.startsWith('webhook.')) {
    const flag = Object.hasOwn(DELIVERY_FLAGS, ev.event) ? DELIVERY_FLAGS[ev.event] : undefined;
    return flag !== undefined && flagApplies(flag, ev.resource) && cfg[flag] === true;
  }
  switch (ev.event) {
    case 'approval.request':
      return cfg.approval_requests === true;
    case 'drift.detected':
      return flagApplies('drift_detected', ev.resource) && cfg.drift_detected === true;
    case 'runner.unhealthy':
      return opAdmitted(cfg, 'unhealthy') && outcome !== 'none';
    case 'runner.inactive':
      return opAdmitted(cfg, 'inactive') && (outcome === 'all' || outcome === 'completion');
    default:
      return false;
  }
}
