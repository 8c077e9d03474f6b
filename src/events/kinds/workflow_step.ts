// `com.svc.workflow_step.lifecycle.v1`: a workflow's step started or ended (spec 6.2).
import type { EventKind, FactOf } from './kind.ts';
import {
  classifyStep,
  eventDataSchema,
  LIFECYCLE,
  lifecycleData,
  lifecycleDataShape,
  lifecycleMatch,
  lifecycleOutcomes,
  lifecycleSlug,
  workflowLinks,
} from './shared.ts';

export const workflow_step: EventKind<FactOf<'workflow_step'>> = {
  kind: 'workflow_step',
  type: 'com.svc.workflow_step.lifecycle.v1',
  subject: (f) => `${f.org_id}/workflow_step/${f.workflow.id}/${f.step.id}/${f.transition}`,
  data: { build: (f) => lifecycleData(f), schema: eventDataSchema('workflow_step', LIFECYCLE, lifecycleDataShape(true)) },
  slug: lifecycleSlug,
  outcomes: lifecycleOutcomes,
  classify: (f) => classifyStep(f.workflow.type, f.step),
  links: (f) => workflowLinks(f, f.step),
  match: lifecycleMatch,
};
