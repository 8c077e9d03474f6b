// Dashboard links of an event (spec 6.5, CONTRACT 6.2).
import type { Fact } from '../domain/facts.ts';

export interface Links {
  org: string;
  install?: string;
  workflow?: string;
  sandbox?: string;
  component?: string;
}

const nonEmpty = (v: string | null | undefined): v is string => typeof v === 'string' && v.length > 0;

/** The install an event concerns: the workflow's owner install, else the fact's install. */
export function installOf(fact: Fact): string | undefined {
  if ('workflow' in fact && fact.workflow.owner_type === 'installs' && nonEmpty(fact.workflow.owner_id)) return fact.workflow.owner_id;
  if ('install_id' in fact && nonEmpty(fact.install_id)) return fact.install_id;
  return undefined;
}

export function workflowOf(fact: Fact): string | undefined {
  return 'workflow' in fact && nonEmpty(fact.workflow.id) ? fact.workflow.id : undefined;
}

/** The sandbox an event concerns: the step's, the drift signal's, or the fact scope's. */
export function sandboxOf(fact: Fact): string | undefined {
  if (fact.kind === 'drift_detected' && nonEmpty(fact.drift.sandbox_id)) return fact.drift.sandbox_id;
  if ('step' in fact && nonEmpty(fact.step.sandbox_id)) return fact.step.sandbox_id;
  if ('sandbox_id' in fact && nonEmpty(fact.sandbox_id)) return fact.sandbox_id;
  return undefined;
}

/** The component an event concerns: the step's, the drift or component health signal's, or the fact scope's. */
export function componentOf(fact: Fact): string | undefined {
  if (fact.kind === 'install_health') return undefined; // its component is the cause, not the subject
  if (fact.kind === 'drift_detected' && nonEmpty(fact.drift.component_id)) return fact.drift.component_id;
  if ('step' in fact && nonEmpty(fact.step.component_id)) return fact.step.component_id;
  if ('component_id' in fact && nonEmpty(fact.component_id)) return fact.component_id;
  return undefined;
}

export function linksFor(fact: Fact, dashboardUrl: string): Links {
  const dash = dashboardUrl.replace(/\/+$/, '');
  const org = `${dash}/${encodeURIComponent(fact.org_id)}`;
  const links: Links = { org };
  const install = installOf(fact);
  const wf = workflowOf(fact);
  const sandbox = sandboxOf(fact);
  const component = componentOf(fact);
  const inst = install ? `${org}/installs/${encodeURIComponent(install)}` : undefined;
  if (inst) links.install = inst;
  if (wf) links.workflow = `${org}/workflows/${encodeURIComponent(wf)}`;
  if (inst && sandbox) links.sandbox = `${inst}/sandbox`;
  if (inst && component) links.component = `${inst}/components/${encodeURIComponent(component)}`;
  return links;
}

/**
 * Where an approval step is approved or rejected (CONTRACT 4.3 `data.approval.url`): its card, with
 * the approve and reject form, on the workflow's dashboard page.
 */
export function approvalUrl(orgId: string, workflowId: string, stepId: string, dashboardUrl: string): string {
  const dash = dashboardUrl.replace(/\/+$/, '');
  return `${dash}/${encodeURIComponent(orgId)}/workflows/${encodeURIComponent(workflowId)}#step-${encodeURIComponent(stepId)}`;
}
