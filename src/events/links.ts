// Dashboard links of an event (spec 6.5, CONTRACT 6.2): the URLs of the entities its kind names (kinds/).
import type { Fact } from '../domain/facts.ts';
import { kindOf } from './kinds/index.ts';

export { approvalUrl } from './kinds/workflow_step_approval.ts';

export interface Links {
  org: string;
  install?: string;
  workflow?: string;
  sandbox?: string;
  component?: string;
}

export function linksFor(fact: Fact, dashboardUrl: string): Links {
  const dash = dashboardUrl.replace(/\/+$/, '');
  const org = `${dash}/${encodeURIComponent(fact.org_id)}`;
  const links: Links = { org };
  const { install, workflow: wf, sandbox, component } = kindOf(fact).links(fact);
  const inst = install ? `${org}/installs/${encodeURIComponent(install)}` : undefined;
  if (inst) links.install = inst;
  if (wf) links.workflow = `${org}/workflows/${encodeURIComponent(wf)}`;
  if (inst && sandbox) links.sandbox = `${inst}/sandbox`;
  if (inst && component) links.component = `${inst}/components/${encodeURIComponent(component)}`;
  return links;
}
