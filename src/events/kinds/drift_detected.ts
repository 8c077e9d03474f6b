// `com.svc.drift.detected.v1`: a drift scan found changes (spec 6.2).
import { z } from 'zod';
import type { EventKind, FactOf } from './kind.ts';
import {
  c,
  EXAMPLE,
  eventDataSchema,
  firstPresent,
  stepData,
  stepDataSchema,
  workflowData,
  workflowDataSchema,
  workflowInstall,
  workflowOrderKey,
} from './shared.ts';

export const drift_detected: EventKind<FactOf<'drift_detected'>> = {
  kind: 'drift_detected',
  type: 'com.svc.drift.detected.v1',
  subject: (f) => `${f.org_id}/drift_detected/${f.workflow.id}/${f.step.id}/detected`,
  data: {
    build: (f) => ({
      workflow: workflowData(f.workflow),
      step: stepData(f.step),
      install_id: f.install_id,
      drift: {
        ...(f.drift.component_id ? { component_id: f.drift.component_id } : {}),
        ...(f.drift.sandbox_id ? { sandbox_id: f.drift.sandbox_id } : {}),
        changes: f.drift.changes.map((ch) => ({ address: ch.address, action: ch.action })),
      },
    }),
    schema: eventDataSchema('drift_detected', ['detected'], {
      workflow: workflowDataSchema,
      step: stepDataSchema,
      install_id: z.string(),
      drift: z.strictObject({
        component_id: z.string().optional(),
        sandbox_id: z.string().optional(),
        changes: z.array(z.strictObject({ address: z.string(), action: z.string() })),
      }),
    }),
  },
  slug: () => 'event:drift.detected',
  routes: { resources: ['components', 'sandboxes'], events: ['drift.detected'] },
  outcomes: () => [],
  classify: (f) => {
    if (f.drift.component_id) return c('components', 'drift');
    if (f.drift.sandbox_id) return c('sandboxes', 'drift');
    // fall back on what the scan was about
    if (f.workflow.type === 'drift_run_reprovision_sandbox' || f.step.sandbox_id || f.step.target_type === 'install_sandbox_runs') {
      return c('sandboxes', 'drift');
    }
    return c('components', 'drift');
  },
  // the drift signal's sandbox and component first, then the step's, then the fact scope's
  links: (f) => ({
    install: workflowInstall(f),
    workflow: firstPresent(f.workflow.id),
    sandbox: firstPresent(f.drift.sandbox_id, f.step.sandbox_id, f.sandbox_id),
    component: firstPresent(f.drift.component_id, f.step.component_id, f.component_id),
  }),
  match: (f) => ({ install: workflowInstall(f), component: firstPresent(f.step.component_id, f.drift.component_id) }),
  catalog: {
    description:
      "A drift scan's plan of a component or a sandbox has changes: what is deployed is not what svc last applied. " +
      '`drift.changes` lists each address and its action.',
    subject_pattern: '<org>/drift_detected/<workflow>/<step>/detected',
    example: {
      kind: 'drift_detected',
      transition: 'detected',
      org_id: EXAMPLE.org,
      time: EXAMPLE.time,
      workflow: { id: 'wf_example_drift', type: 'drift_run', owner_id: EXAMPLE.install, owner_type: 'installs' },
      step: {
        id: 'step_example_plan',
        name: 'plan api',
        idx: 0,
        target_type: 'install_deploys',
        target_id: null,
        component_id: EXAMPLE.component,
        sandbox_id: null,
        execution_type: 'system',
      },
      install_id: EXAMPLE.install,
      drift: {
        component_id: EXAMPLE.component,
        changes: [
          { address: 'kubernetes_deployment.api', action: 'update' },
          { address: 'kubernetes_config_map.api_env', action: 'replace' },
        ],
      },
    },
  },
  orderKey: workflowOrderKey,
};
