// Workflows, their steps and approvals (CONTRACT 4.2). In: the answer to an approval. Out and View
// (the same schemas): a step, a workflow, a workflow without its steps; the services return the
// types inferred from them, the API registers them as its response bodies, the dashboard renders them.
import { z } from 'zod';
import type { ParentRef } from '../domain/facts.ts';
import { EXECUTION_TYPES, OWNER_TYPES, STEP_STATUSES } from '../domain/status.ts';
import { apiSchemas, type Same, timestamp } from './common.ts';
import { approvalPolicyViewShape, respondedBySchema } from './approval-policies.ts';

// ------------------------------------------------------------------ In

/** POST …/steps/{step_id}/approval: approve or reject, with a note. */
export const approvalInSchema = z.strictObject({ response: z.enum(['approved', 'rejected']), note: z.string().max(4000).optional() });

// ------------------------------------------------------------------ Out and View

/** Any status a workflow, step or app config version shows. */
export const statusSchema = z.enum(STEP_STATUSES);

export const parentRefSchema = z
  .object({ workflow_id: z.string(), step_id: z.string(), kind: z.literal('workflow_step') })
  .register(apiSchemas, { id: 'ParentRef' });

export const approvalSchema = z
  .object({
    status: z.enum(['requested', 'approved', 'rejected', 'expired']),
    plan: z.unknown().optional(),
    note: z.string().optional(),
    responded_at: timestamp.optional(),
    responded_by: respondedBySchema.optional(),
    ...approvalPolicyViewShape,
  })
  .register(apiSchemas, { id: 'Approval' });

/** A step as the API returns it: `approval` and `plan` only when the step has them. */
export const stepSchema = z
  .object({
    step_id: z.string(),
    name: z.string(),
    idx: z.number().int(),
    target_type: z.string().nullable(),
    target_id: z.string().nullable(),
    component_id: z.string().nullable(),
    sandbox_id: z.string().nullable(),
    execution_type: z.enum(EXECUTION_TYPES),
    status: statusSchema,
    error: z.string().nullable(),
    started_at: timestamp.nullable(),
    finished_at: timestamp.nullable(),
    approval: approvalSchema.optional(),
    plan: z.unknown().optional(),
  })
  .register(apiSchemas, { id: 'Step' });
export type StepView = z.infer<typeof stepSchema>;

const workflowSummaryShape = {
  workflow_id: z.string(),
  type: z.string(),
  owner_id: z.string(),
  owner_type: z.enum(OWNER_TYPES),
  parent: parentRefSchema.nullable(),
  status: statusSchema,
  error: z.string().nullable(),
  created_at: timestamp,
  started_at: timestamp.nullable(),
  finished_at: timestamp.nullable(),
};
export const workflowSummarySchema = z.object(workflowSummaryShape).register(apiSchemas, { id: 'WorkflowSummary' });
export type WorkflowSummary = z.infer<typeof workflowSummarySchema>;
export const workflowSummaryListSchema = z.array(workflowSummarySchema);

export const workflowSchema = z
  .object({
    ...workflowSummaryShape,
    action_id: z.string().nullable(),
    external: z.boolean(),
    steps: z.array(stepSchema),
  })
  .register(apiSchemas, { id: 'Workflow' });
export type WorkflowView = z.infer<typeof workflowSchema>;

/** GET /v1/approvals: the steps awaiting approval, each with its workflow and owner. */
export const pendingApprovalListSchema = z
  .object({
    data: z.array(
      z.object({
        workflow: workflowSummarySchema.extend({
          owner: z.object({
            type: z.enum(OWNER_TYPES),
            id: z.string(),
            name: z.string().nullable(),
            app: z.object({ app_id: z.string(), name: z.string() }).nullable(),
          }),
        }),
        step: stepSchema,
      }),
    ),
  })
  .register(apiSchemas, { id: 'PendingApprovalList' });

const sameTypes: [Same<z.infer<typeof parentRefSchema>, ParentRef>] = [true];
void sameTypes;
