// `com.svc.workflow.lifecycle.v1`: a workflow started or ended (spec 6.2).
import type { EventKind, FactOf } from './kind.ts';
import { classifyWorkflow, lifecycleKind, workflowLinks } from './shared.ts';

export const workflow: EventKind<FactOf<'workflow'>> = lifecycleKind('workflow', 'com.svc.workflow.lifecycle.v1', {
  subject: (f) => `${f.org_id}/workflow/${f.workflow.id}/${f.transition}`,
  classify: (f) => classifyWorkflow(f.workflow.type),
  links: (f) => workflowLinks(f, undefined),
});
