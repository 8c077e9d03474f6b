// Installs (CONTRACT 4.2). In: create an install, run an action, start a drift scan, update inputs,
// plan or apply an app config. Out and View (the same schema): an install with its components'
// health, its actions and its worst verdict.
import { z } from 'zod';
import { VERDICTS } from '../domain/status.ts';
import { apiSchemas, id, labels, name, storedLabels, timestamp } from './common.ts';

// ------------------------------------------------------------------ In

export const createInstallSchema = z.strictObject({
  app_id: id,
  name,
  app_config_id: id.optional(),
  labels: labels.optional(),
  app_branch_id: id.optional(),
});

export const actionRunSchema = z.strictObject({ inputs: z.record(z.string(), z.unknown()).optional() });
export const driftScanSchema = z.strictObject({ sandbox: z.boolean().optional() });
export const inputsUpdateSchema = z.strictObject({ inputs: z.record(z.string(), z.unknown()) });
/** POST …/app-config-updates: apply an app config (a rollback or a roll forward), or plan it. */
export const configUpdateSchema = z.strictObject({ app_config_id: id, plan_only: z.boolean().optional() });

// ------------------------------------------------------------------ Out and View

/** An install as the API returns it: its components with their health, its actions, the worst verdict. */
export const installSchema = z
  .object({
    install_id: z.string(),
    name: z.string(),
    app_id: z.string(),
    labels: storedLabels,
    app_config_id: z.string().nullable(),
    app_branch_id: z.string().nullable(),
    components: z.array(z.object({ component_id: z.string(), name: z.string(), labels: storedLabels, health: z.enum(VERDICTS) })),
    actions: z.array(
      z.object({
        action_id: z.string(),
        name: z.string(),
        labels: storedLabels,
        inputs: z.record(z.string(), z.object({ required: z.boolean().optional() })),
      }),
    ),
    sandbox_id: z.string(),
    runner_id: z.string(),
    inputs: z.record(z.string(), z.unknown()),
    health: z.enum(VERDICTS),
    provisioned: z.boolean(),
    created_at: timestamp,
  })
  .register(apiSchemas, { id: 'Install' });
export type InstallView = z.infer<typeof installSchema>;

export const installListSchema = z.array(installSchema);
