// The workflow and install views (CONTRACT 4.2): one zod schema per view type, the types the
// services return inferred from them. The API registers the same schemas as its response bodies and OpenAPI
// components (src/http/responses.ts); the dashboard renders the same types.
import { z } from 'zod';

export const timestamp = z.string();

export const STATUSES = ['pending', 'started', 'awaiting_approval', 'skipped', 'succeeded', 'failed', 'cancelled'] as const;
export const OWNER_TYPES = ['installs', 'apps', 'app_branches'] as const;
export const EXECUTION_TYPES = ['system', 'user', 'approval', 'skipped', 'hidden'] as const;
export const statusSchema = z.enum(STATUSES);

export const parentRefSchema = z.object({ workflow_id: z.string(), step_id: z.string(), kind: z.literal('workflow_step') });

export const approvalViewSchema = z.object({
  status: z.enum(['requested', 'approved', 'rejected']),
  plan: z.unknown().optional(),
  note: z.string().optional(),
  responded_at: timestamp.optional(),
  responded_by: z.object({ token_id: z.string().nullable(), token_name: z.string().nullable() }).optional(),
});

/** A step as the API returns it: `approval` and `plan` only when the step has them. */
export const stepViewSchema = z.object({
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
  approval: approvalViewSchema.optional(),
  plan: z.unknown().optional(),
});
export type StepView = z.infer<typeof stepViewSchema>;

export const workflowSummaryShape = {
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
export const workflowSummaryViewSchema = z.object(workflowSummaryShape);
export type WorkflowSummary = z.infer<typeof workflowSummaryViewSchema>;

export const workflowViewSchema = z.object({
  ...workflowSummaryShape,
  action_id: z.string().nullable(),
  external: z.boolean(),
  steps: z.array(stepViewSchema),
});
export type WorkflowView = z.infer<typeof workflowViewSchema>;

export const VERDICTS = ['healthy', 'degraded', 'unhealthy', 'unknown'] as const;
const labels = z.record(z.string(), z.string());

/** An install as the API returns it: its components with their health, its actions, the worst verdict. */
export const installViewSchema = z.object({
  install_id: z.string(),
  name: z.string(),
  app_id: z.string(),
  labels,
  app_config_id: z.string().nullable(),
  app_branch_id: z.string().nullable(),
  components: z.array(z.object({ component_id: z.string(), name: z.string(), labels, health: z.enum(VERDICTS) })),
  actions: z.array(
    z.object({
      action_id: z.string(),
      name: z.string(),
      labels,
      inputs: z.record(z.string(), z.object({ required: z.boolean().optional() })),
    }),
  ),
  sandbox_id: z.string(),
  runner_id: z.string(),
  inputs: z.record(z.string(), z.unknown()),
  health: z.enum(VERDICTS),
  provisioned: z.boolean(),
  created_at: timestamp,
});
export type InstallView = z.infer<typeof installViewSchema>;
