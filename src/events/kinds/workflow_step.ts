// `com.svc.workflow_step.lifecycle.v1`: a workflow's step started or ended (spec 6.2).
import type { EventKind, FactOf } from './kind.ts';
import { classifyStep, EXAMPLE, EXAMPLE_STEP, EXAMPLE_WORKFLOW, lifecycleKind, workflowLinks } from './shared.ts';

export const workflow_step: EventKind<FactOf<'workflow_step'>> = lifecycleKind('workflow_step', 'com.svc.workflow_step.lifecycle.v1', {
  subject: (f) => `${f.org_id}/workflow_step/${f.workflow.id}/${f.step.id}/${f.transition}`,
  classify: (f) => classifyStep(f.workflow.type, f.step),
  links: (f) => workflowLinks(f, f.step),
  catalog: {
    description:
      'A step of a workflow started, succeeded, failed or was cancelled: a component deployed, a sandbox provisioned, an ' +
      'action run (`step.target_type`, CONTRACT 6.1). Terminal transitions carry `outcome`, with `outcome.error` on failed.',
    subject_pattern: '<org>/workflow_step/<workflow>/<step>/<transition>',
    example: {
      kind: 'workflow_step',
      transition: 'failed',
      org_id: EXAMPLE.org,
      time: EXAMPLE.time,
      workflow: EXAMPLE_WORKFLOW,
      step: EXAMPLE_STEP,
      outcome: { status: 'failed', duration_ms: 31874, error: 'helm upgrade api: timed out waiting for the condition' },
    },
  },
});
