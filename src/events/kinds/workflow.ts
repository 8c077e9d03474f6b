// `com.svc.workflow.lifecycle.v1`: a workflow started or ended (spec 6.2).
import type { EventKind, FactOf } from './kind.ts';
import { classifyWorkflow, EXAMPLE, EXAMPLE_WORKFLOW, lifecycleKind, workflowLinks } from './shared.ts';

export const workflow: EventKind<FactOf<'workflow'>> = lifecycleKind('workflow', 'com.svc.workflow.lifecycle.v1', {
  subject: (f) => `${f.org_id}/workflow/${f.workflow.id}/${f.transition}`,
  classify: (f) => classifyWorkflow(f.workflow.type),
  links: (f) => workflowLinks(f, undefined),
  catalog: {
    description:
      'A workflow started, succeeded, failed or was cancelled: an install provisioned, components deployed, an action run, a ' +
      'rollout across installs (`workflow.type`, CONTRACT 6.1). Terminal transitions carry `outcome`.',
    subject_pattern: '<org>/workflow/<workflow>/<transition>',
    example: {
      kind: 'workflow',
      transition: 'succeeded',
      org_id: EXAMPLE.org,
      time: EXAMPLE.time,
      workflow: EXAMPLE_WORKFLOW,
      outcome: { status: 'succeeded', duration_ms: 48210 },
    },
  },
});
