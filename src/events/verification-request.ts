// The verification request (CONTRACT 6.2 `com.svc.rollout.verification.v1`): the CloudEvent a
// verify step POSTs to each of its run's verification URLs, enveloped as every other event (id,
// source, time, subject, the svc extensions, data with kind, transition and org_id first and links
// last). It is sent only to those URLs: not to webhooks, not to the outbox, not kept in the event
// history. Its interests are those of the run's events (resource app_branches, op run, 6.1).
import type { CloudEvent } from './cloudevent.ts';
import { eventId } from './cloudevent.ts';
import type { OwnerType, ExecutionType } from '../domain/status.ts';

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

export function verificationEvent(r: VerificationRequest, o: { source: string; dashboardUrl: string; nowMs?: number }): CloudEvent {
  const dash = o.dashboardUrl.replace(/\/+$/, '');
  const org = `${dash}/${encodeURIComponent(r.org_id)}`;
  return {
    specversion: '1.0',
    id: eventId(o.nowMs),
    type: VERIFICATION_TYPE,
    source: o.source,
    time: r.time,
    subject: `${r.org_id}/${VERIFICATION_KIND}/${r.workflow.id}/${r.step.id}/requested`,
    datacontenttype: 'application/json',
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
