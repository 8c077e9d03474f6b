// `com.svc.workflow_step.lifecycle.v1`: a workflow's step started or ended (spec 6.2).
import type { EventKind, FactOf } from './kind.ts';
import { classifyStep, lifecycleKind, workflowLinks } from './shared.ts';

export const workflow_step: EventKind<FactOf<'workflow_step'>> = lifecycleKind('workflow_step', 'com.svc.workflow_step.lifecycle.v1', {
  subject: (f) => `${f.org_id}/workflow_step/${f.workflow.id}/${f.step.id}/${f.transition}`,
  classify: (f) => classifyStep(f.workflow.type, f.step),
  links: (f) => workflowLinks(f, f.step),
});
