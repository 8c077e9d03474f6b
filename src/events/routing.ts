// The route of a fact's event (src/domain/event-route.ts), computed once, where the event is emitted.
import type { EventRoute, RouteEntity, Labels } from '../domain/event-route.ts';
import type { Fact } from '../domain/facts.ts';
import type { Classification } from './classify.ts';
import { eventSlug } from './slugs.ts';

/** Labels of an entity of the event's own org; null when the org has no such entity (CONTRACT 6.7). */
export interface LabelLookup {
  install(orgId: string, id: string): Labels | null;
  component(orgId: string, id: string): Labels | null;
  action(orgId: string, id: string): Labels | null;
}

const present = (v: string | null | undefined): v is string => typeof v === 'string' && v.length > 0;

/** The install `match` tests (CONTRACT 6.3): the owner install, else the install of the step, runner or signal. */
function installIdOf(fact: Fact): string | undefined {
  if ('workflow' in fact && fact.workflow.owner_type === 'installs' && present(fact.workflow.owner_id)) return fact.workflow.owner_id;
  if ('install_id' in fact && present(fact.install_id)) return fact.install_id;
  return undefined;
}

/** The component `match` tests: the step's, the drift signal's or the component health signal's (not install health's). */
function componentIdOf(fact: Fact): string | undefined {
  if ('step' in fact && present(fact.step.component_id)) return fact.step.component_id;
  if (fact.kind === 'drift_detected' && present(fact.drift.component_id)) return fact.drift.component_id;
  if (fact.kind === 'component_health') return fact.component_id;
  return undefined;
}

/** The action `match` tests: the action run's action (lifecycle events of action runs). */
function actionIdOf(fact: Fact): string | undefined {
  if ((fact.kind === 'workflow' || fact.kind === 'workflow_step') && fact.action && present(fact.action.id)) return fact.action.id;
  return undefined;
}

export function routeOf(fact: Fact, type: string, cls: Classification | null, labels: LabelLookup, rev: number): EventRoute {
  const org = fact.org_id;
  const entity = (id: string | undefined, find: (o: string, i: string) => Labels | null): RouteEntity | null =>
    id === undefined ? null : { id, labels: find(org, id) };
  return {
    org,
    type,
    resource: cls?.resource ?? '',
    op: cls?.op ?? '',
    event: eventSlug(fact).slice('event:'.length),
    install: entity(installIdOf(fact), labels.install),
    component: entity(componentIdOf(fact), labels.component),
    action: entity(actionIdOf(fact), labels.action),
    rev,
    ...(fact.kind === 'webhook_delivery' ? { not_to: fact.webhook.id } : {}),
  };
}
