// The verification request (CONTRACT 6.2 `com.svc.rollout.verification.v1`): the CloudEvent a
// verify step POSTs to each of its run's verification URLs, enveloped as every other event (id,
// source, time, subject, the svc extensions, data with kind, transition and org_id first and links
// last). It is sent only to those URLs: not to webhooks, not to the outbox, not kept in the event
// history. Its interests are those of the run's events (resource app_branches, op run, 6.1).
// Its `data` schema (the event catalog's, CONTRACT 10.3) and its example are here beside it.
import { z } from 'zod';
import type { CloudEvent } from './cloudevent.ts';
import { dataschemaFor, eventId } from './cloudevent.ts';
import type { OwnerType, ExecutionType } from '../domain/status.ts';
import { EXAMPLE, eventDataSchema, stepDataSchema, workflowDataSchema } from './kinds/shared.ts';

export const VERIFICATION_TYPE = 'com.svc.rollout.verification.v1';
export const VERIFICATION_KIND = 'rollout_verification';

/** An install of the group, as the request names it. */
export interface VerifiedInstall {
  install_id: string;
  install_name: string;
  labels: Record<string, string>;
  old_app_config_id: string | null;
  new_app_config_id: string | null;
}

export interface VerificationRequest {
  org_id: string;
  /** when the engine recorded the ask (ISO 8601) */
  time: string;
  workflow: { id: string; type: string; owner_id: string; owner_type: OwnerType };
  step: {
    id: string;
    name: string;
    idx: number;
    target_type: string | null;
    target_id: string | null;
    component_id: string | null;
    sandbox_id: string | null;
    execution_type: ExecutionType;
  };
  rollout: { run_id: string; group: string; attempt: number; installs: VerifiedInstall[] };
}

/** The whole `data` of a verification request, as verificationEvent builds it (CONTRACT 6.2). */
export const verificationDataSchema = eventDataSchema(VERIFICATION_KIND, ['requested'], {
  workflow: workflowDataSchema,
  step: stepDataSchema,
  rollout: z.strictObject({
    run_id: z.string(),
    group: z.string(),
    /** the requests to that URL for that group, from 1 */
    attempt: z.number().int().positive(),
    installs: z.array(
      z.strictObject({
        install_id: z.string(),
        install_name: z.string(),
        labels: z.record(z.string(), z.string()),
        old_app_config_id: z.string().nullable(),
        new_app_config_id: z.string().nullable(),
      }),
    ),
  }),
});

/** What the event catalog says of the verification request (CONTRACT 10.3). */
export const VERIFICATION_CATALOG = {
  description:
    "A rollout's verify step asks one of its run's verification URLs whether a group's installs are good (answer 2xx: " +
    'pass). Sent only to those URLs, never to webhooks, and not kept in the history.',
  subject_pattern: `<org>/${VERIFICATION_KIND}/<workflow>/<step>/requested`,
  example: {
    org_id: EXAMPLE.org,
    time: EXAMPLE.time,
    workflow: { id: 'wf_example_rollout', type: 'app_branch_run', owner_id: 'br_example_main', owner_type: 'app_branches' },
    step: {
      id: 'step_example_verify',
      name: 'verify ring canary',
      idx: 3,
      target_type: null,
      target_id: null,
      component_id: null,
      sandbox_id: null,
      execution_type: 'system',
    },
    rollout: {
      run_id: 'run_example',
      group: 'canary',
      attempt: 1,
      installs: [
        {
          install_id: EXAMPLE.install,
          install_name: 'eu-1',
          labels: { ring: 'canary', region: 'eu' },
          old_app_config_id: 'cfg_example_v41',
          new_app_config_id: 'cfg_example_v42',
        },
      ],
    },
  } satisfies VerificationRequest,
};

export function verificationEvent(
  r: VerificationRequest,
  o: { source: string; baseUrl: string; dashboardUrl: string; nowMs?: number; id?: string },
): CloudEvent {
  const dash = o.dashboardUrl.replace(/\/+$/, '');
  const org = `${dash}/${encodeURIComponent(r.org_id)}`;
  return {
    specversion: '1.0',
    id: o.id ?? eventId(o.nowMs),
    type: VERIFICATION_TYPE,
    source: o.source,
    time: r.time,
    subject: `${r.org_id}/${VERIFICATION_KIND}/${r.workflow.id}/${r.step.id}/requested`,
    datacontenttype: 'application/json',
    dataschema: dataschemaFor(o.baseUrl, VERIFICATION_TYPE),
    svcorgid: r.org_id,
    svckind: VERIFICATION_KIND,
    svctransition: 'requested',
    interests: ['resource:app_branches', 'op:app_branches.run'],
    data: {
      kind: VERIFICATION_KIND,
      transition: 'requested',
      org_id: r.org_id,
      workflow: r.workflow,
      step: r.step,
      rollout: r.rollout,
      links: { org, workflow: `${org}/workflows/${encodeURIComponent(r.workflow.id)}` },
    },
  };
}
