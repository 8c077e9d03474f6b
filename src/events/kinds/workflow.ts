// `com.svc.workflow.lifecycle.v1`: a workflow started or ended (spec 6.2).
import type { EventKind, FactOf } from './kind.ts';
import {
  classifyWorkflow,
  eventDataSchema,
  LIFECYCLE,
  lifecycleData,
  lifecycleDataShape,
  lifecycleMatch,
  lifecycleOutcomes,
  lifecycleSlug,
  workflowLinks,
} from './shared.ts';

export const workflow: EventKind<FactOf<'workflow'>> = {
  kind: 'workflow',
  type: 'com.svc.workflow.lifecycle.v1',
  subject: (f) => `${f.org_id}/workflow/${f.workflow.id}/${f.transition}`,
  data: { build: (f) => lifecycleData(f), schema: eventDataSchema('workflow', LIFECYCLE, lifecycleDataShape(false)) },
  slug: lifecycleSlug,
  outcomes: lifecycleOutcomes,
  classify: (f) => classifyWorkflow(f.workflow.type),
  links: (f) => workflowLinks(f, undefined),
  match: lifecycleMatch,
};
