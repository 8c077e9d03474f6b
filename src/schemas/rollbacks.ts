// An install's app config versions and updates, fleet rollbacks and branch runs (CONTRACT 4.3). In:
// a branch run, a fleet rollback. Out: a version, what it changed, the plan of an update or a
// rollback, what a run or a rollback started.
import { z } from 'zod';
import type { ConfigDiff, FieldChange } from '../domain/config-diff.ts';
import { configBodyShape, vetoViewSchema } from './apps.ts';
import { approvalPolicyInSchema } from './approval-policies.ts';
import { healthGateInSchema, rolloutPolicyInSchema, verificationListSchema } from './rollouts.ts';
import { apiSchemas, described, id, type Same, selectorSchema, storedLabels, timestamp } from './common.ts';
import { statusSchema as status } from './workflows.ts';

// ------------------------------------------------------------------ In

/** What a branch run and a fleet rollback are both given: the health gate, the rollout policy, the verification URLs. */
const rolloutShape = {
  health_gate: healthGateInSchema.optional(),
  rollout: rolloutPolicyInSchema.optional(),
  verification: verificationListSchema.optional(),
  /** a stricter approval policy for this run's approval steps (CONTRACT 10.4), on top of the app's */
  approval_policy: approvalPolicyInSchema.optional(),
};

export const branchRunSchema = z.strictObject({
  app_config_id: id,
  skip_builds: z.boolean().optional(),
  ...rolloutShape,
});

export const fleetRollbackSchema = z.strictObject({
  to: z.union([z.literal('previous'), id]),
  install_ids: z.array(id).min(1).optional(),
  selector: selectorSchema.optional(),
  plan_only: z.boolean().optional(),
  ...rolloutShape,
  approval: z.enum(['per_group', 'none']).optional(),
});

// ------------------------------------------------------------------ Out

export const versionSchema = z
  .object({
    version_id: z.string(),
    install_id: z.string(),
    version: z.number().int(),
    app_config_id: z.string(),
    app_config: z.object({ app_config_id: z.string(), version: z.number().int(), ...configBodyShape }).nullable(),
    old_app_config_id: z.string().nullable(),
    workflow_id: z.string().nullable(),
    status,
    created_at: timestamp,
  })
  .register(apiSchemas, { id: 'AppConfigVersion' });

export const versionListSchema = z.array(versionSchema);

export const fieldChangeSchema = z
  .object({ path: z.string(), op: z.enum(['add', 'remove', 'replace']), old: z.unknown().optional(), new: z.unknown().optional() })
  .register(apiSchemas, { id: 'FieldChange' });

const named = z.object({ name: z.string() });
const configDiffShape = {
  changed: z.boolean(),
  components: z.object({
    added: z.array(named),
    removed: z.array(named),
    changed: z.array(z.object({ name: z.string(), changes: z.array(fieldChangeSchema) })),
    unchanged: z.array(named),
  }),
  sandbox_changed: z.boolean(),
  inputs_changed: z.boolean(),
};

export const versionDiffSchema = z
  .object({ version_id: z.string(), from_app_config_id: z.string().nullable(), to_app_config_id: z.string(), ...configDiffShape })
  .register(apiSchemas, { id: 'AppConfigVersionDiff' });

export const configPlanSchema = z
  .object({
    from_app_config_id: z.string().nullable(),
    to_app_config_id: z.string(),
    ...configDiffShape,
    vetoed: vetoViewSchema.optional(),
  })
  .register(apiSchemas, { id: 'AppConfigPlan' });

/** `plan_only: true` answered with `plan`: nothing changed and no workflow started. */
const PLANNED = 'plan_only: nothing changed and no workflow started';

export const configUpdatePlannedSchema = z
  .object({ plan: configPlanSchema, applied: z.literal(false) })
  .register(apiSchemas, { id: 'AppConfigUpdatePlanned', description: PLANNED });

export const configUpdateAppliedSchema = z
  .object({ plan: configPlanSchema, applied: z.literal(true), workflow_id: z.string(), version_id: z.string() })
  .register(apiSchemas, { id: 'AppConfigUpdateApplied' });

export const configDiffSchema = z.object(configDiffShape).register(apiSchemas, { id: 'AppConfigDiff' });

/** One install of a fleet rollback's plan: its move, its diff, its wait for change windows. */
export const plannedInstallSchema = z.object({
  install_id: z.string(),
  install_name: z.string(),
  labels: storedLabels,
  install_group: described(z.string(), "the group the install is rolled back in: its group in the app's branches, else `other`"),
  old_app_config_id: z.string().nullable(),
  new_app_config_id: z.string(),
  diff: configDiffSchema,
  vetoed: vetoViewSchema.optional(),
  scheduled_at: described(
    z.string().nullable(),
    'when its update may start: now, or when its next change window opens (null: none within two weeks)',
  ),
  blocked_by: described(z.array(z.string()), 'the change windows holding it ([] when none)'),
  blocked_by_names: described(z.array(z.string()), "those windows' names, in the same order"),
});

/** An install a fleet rollback leaves out, and why. */
export const skippedInstallSchema = z.object({ install_id: z.string(), reason: z.string() });

export const fleetRollbackPlanSchema = z
  .object({ installs: z.array(plannedInstallSchema), skipped: z.array(skippedInstallSchema) })
  .register(apiSchemas, { id: 'FleetRollbackPlan' });

export const fleetRollbackPlannedSchema = z
  .object({ plan: fleetRollbackPlanSchema, applied: z.literal(false) })
  .register(apiSchemas, { id: 'FleetRollbackPlanned', description: PLANNED });

export const fleetRollbackStartedSchema = z
  .object({ run_id: z.string(), workflow_id: z.string(), status, plan: fleetRollbackPlanSchema, applied: z.literal(true) })
  .register(apiSchemas, { id: 'FleetRollback', description: 'an app_rollback workflow owned by the app' });

export const branchRunResultSchema = z
  .object({ run_id: z.string(), workflow_id: z.string(), app_branch_id: z.string(), app_config_id: z.string(), status })
  .register(apiSchemas, { id: 'AppBranchRun' });

const sameTypes: [
  Same<z.infer<typeof fieldChangeSchema>['op'], FieldChange['op']>,
  Same<z.infer<typeof versionDiffSchema>['components']['added'], ConfigDiff['components']['added']>,
] = [true, true];
void sameTypes;
