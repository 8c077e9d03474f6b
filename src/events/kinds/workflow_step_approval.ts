// `com.svc.workflow_step.approval.v1`: an approval step asks, or was answered (CONTRACT 4.3).
import { WORKFLOW_RESOURCES } from '../../domain/subscription.ts';
import { z } from 'zod';
import type { ApprovalFact } from '../../domain/facts.ts';
import type { EventKind, FactOf } from './kind.ts';
import {
  classifyStep,
  EXAMPLE,
  EXAMPLE_STEP,
  EXAMPLE_WORKFLOW,
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

const TRANSITIONS = ['requested', 'response_recorded', 'approved', 'rejected', 'expired'] as const;
/** `approval.status` after each transition (a recorded response leaves the step requested) */
const STATUSES = ['requested', 'approved', 'rejected', 'expired'] as const;

const respondedBySchema = z.union([
  z.strictObject({ token_id: z.string().nullable(), token_name: z.string().nullable() }),
  z.strictObject({ type: z.literal('policy'), reason: z.string() }),
]);

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
  // who answered (CONTRACT 2): the token's id and name, never the token; or the policy (auto_approve, CONTRACT 10.4)
  const by = a.responded_by;
  if (by) out.responded_by = 'type' in by ? { type: by.type, reason: by.reason } : { token_id: by.token_id, token_name: by.token_name };
  // under a policy (CONTRACT 10.4): the answer recorded, the deciding rule, each rule as k of n, the expiry
  if (a.response) out.response = a.response;
  if (a.decided_by_rule) out.decided_by_rule = a.decided_by_rule;
  if (a.rules) out.rules = a.rules.map((r) => ({ name: r.name, required: r.required, approved: r.approvals.length }));
  if (a.expires_at) out.expires_at = a.expires_at;
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
        status: z.enum(STATUSES),
        plan: z.unknown().optional(),
        plan_truncated: z.literal(true).optional(),
        note: z.string().optional(),
        responded_at: z.string().optional(),
        /** a token (CONTRACT 2), or `{type: "policy", reason}` when the policy's auto_approve decided (CONTRACT 10.4) */
        responded_by: respondedBySchema.optional(),
        /** on `requested` */
        url: z.string().optional(),
        /** on `response_recorded`: the answer that was counted */
        response: z.enum(['approved', 'rejected']).optional(),
        /** on `approved` or `rejected` decided by a policy: the rule that decided */
        decided_by_rule: z.string().optional(),
        /** under a policy: each rule, its required count and how many approved so far */
        rules: z.array(z.strictObject({ name: z.string(), required: z.number().int(), approved: z.number().int() })).optional(),
        /** under a policy with expires_after: when the step fails approval_expired */
        expires_at: z.string().optional(),
      }),
    }),
  },
  // a recorded response (and an expiry) goes where approval responses go (CONTRACT 10.4)
  slug: (f) =>
    f.transition === 'requested'
      ? 'event:approval.request'
      : f.transition === 'response_recorded'
        ? 'event:approval.response.recorded'
        : `event:approval.response.${f.transition}`,
  routes: {
    resources: WORKFLOW_RESOURCES,
    events: [
      'approval.request',
      'approval.response.recorded',
      'approval.response.approved',
      'approval.response.rejected',
      'approval.response.expired',
    ],
  },
  outcomes: () => [],
  classify: (f) => classifyStep(f.workflow.type, f.step),
  links: (f) => workflowLinks(f, f.step),
  match: (f) => ({ install: workflowInstall(f), component: firstPresent(f.step.component_id) }),
  catalog: {
    description:
      'An approval step asks for an answer (`requested`, with the plan to approve and the URL of its approve and reject ' +
      'form), or was answered (`approved`, `rejected`, with the note and who answered).',
    subject_pattern: '<org>/workflow_step_approval/<workflow>/<step>/<transition>',
    example: {
      kind: 'workflow_step_approval',
      transition: 'requested',
      org_id: EXAMPLE.org,
      time: EXAMPLE.time,
      workflow: EXAMPLE_WORKFLOW,
      step: { ...EXAMPLE_STEP, id: 'step_example_approve', name: 'approve api', idx: 0, execution_type: 'approval' },
      approval: { status: 'requested', plan: { changes: [{ address: 'helm_release.api', action: 'update' }] } },
    },
  },
  orderKey: workflowOrderKey,
};
