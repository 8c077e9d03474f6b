// `com.svc.workflow_step.approval.v1`: an approval step asks, or was answered (CONTRACT 4.3).
import { z } from 'zod';
import type { ApprovalFact } from '../../domain/facts.ts';
import type { EventKind, FactOf } from './kind.ts';
import {
  classifyStep,
  eventDataSchema,
  firstPresent,
  stepData,
  stepDataSchema,
  workflowData,
  workflowDataSchema,
  workflowInstall,
  workflowLinks,
  workflowOrderKey,
} from './shared.ts';

/** Approval plans whose JSON is larger than this are left out of the event (plan_truncated). */
export const MAX_PLAN_BYTES = 64 * 1024;

const TRANSITIONS = ['requested', 'approved', 'rejected'] as const;

function jsonBytes(v: unknown): number {
  try {
    const s = JSON.stringify(v);
    return s === undefined ? 0 : Buffer.byteLength(s, 'utf8');
  } catch {
    return Number.POSITIVE_INFINITY;
  }
}

function approvalData(a: ApprovalFact['approval']): Record<string, unknown> {
  const out: Record<string, unknown> = { status: a.status };
  if (a.plan !== undefined && a.plan !== null) {
    if (jsonBytes(a.plan) > MAX_PLAN_BYTES) out.plan_truncated = true;
    else out.plan = a.plan;
  }
  if (a.note !== undefined && a.note !== null) out.note = a.note;
  if (a.responded_at !== undefined && a.responded_at !== null) out.responded_at = a.responded_at;
  // who answered (CONTRACT 2): the token's id and name, never the token
  if (a.responded_by) out.responded_by = { token_id: a.responded_by.token_id, token_name: a.responded_by.token_name };
  return out;
}

/**
 * Where an approval step is approved or rejected (CONTRACT 4.3 `data.approval.url`): its card, with
 * the approve and reject form, on the workflow's dashboard page.
 */
export function approvalUrl(orgId: string, workflowId: string, stepId: string, dashboardUrl: string): string {
  const dash = dashboardUrl.replace(/\/+$/, '');
  return `${dash}/${encodeURIComponent(orgId)}/workflows/${encodeURIComponent(workflowId)}#step-${encodeURIComponent(stepId)}`;
}

export const workflow_step_approval: EventKind<FactOf<'workflow_step_approval'>> = {
  kind: 'workflow_step_approval',
  type: 'com.svc.workflow_step.approval.v1',
  subject: (f) => `${f.org_id}/workflow_step_approval/${f.workflow.id}/${f.step.id}/${f.transition}`,
  data: {
    build: (f, dashboardUrl) => {
      const approval = approvalData(f.approval);
      if (f.transition === 'requested') approval.url = approvalUrl(f.org_id, f.workflow.id, f.step.id, dashboardUrl);
      return { workflow: workflowData(f.workflow), step: stepData(f.step), approval };
    },
    schema: eventDataSchema('workflow_step_approval', TRANSITIONS, {
      workflow: workflowDataSchema,
      step: stepDataSchema,
      approval: z.strictObject({
        status: z.enum(TRANSITIONS),
        plan: z.unknown().optional(),
        plan_truncated: z.literal(true).optional(),
        note: z.string().optional(),
        responded_at: z.string().optional(),
        responded_by: z.strictObject({ token_id: z.string().nullable(), token_name: z.string().nullable() }).optional(),
        /** on `requested` */
        url: z.string().optional(),
      }),
    }),
  },
  slug: (f) => (f.transition === 'requested' ? 'event:approval.request' : `event:approval.response.${f.transition}`),
  outcomes: () => [],
  classify: (f) => classifyStep(f.workflow.type, f.step),
  links: (f) => workflowLinks(f, f.step),
  match: (f) => ({ install: workflowInstall(f), component: firstPresent(f.step.component_id) }),
  orderKey: workflowOrderKey,
};
