// What the step policies read of a step's or a run's params, parsed (zod) rather than cast. Each
// policy's own state sits beside it (a bake's verdicts in ./bake.ts, a verify step's answers in
// ./verify.ts, a window wait in ./window.ts; the machines' snapshots in machines/); what several
// of them share is here: a group step's installs, and the run's params a step reads.
import { z } from 'zod';
import type { StepRow, WorkflowRow } from '../../../store/workflows.ts';

/** A step of a run's group (its deploy, verify or bake): the group's name and its installs. */
const groupStepSchema = z.object({
  group: z.string().optional(),
  install_ids: z.array(z.string()).default([]),
});
export type GroupStep = z.infer<typeof groupStepSchema>;

export const groupStepOf = (step: StepRow): GroupStep => groupStepSchema.parse(step.params);

/** A group deploy's record of its installs' configs before the run (config-apply.ts deployGroup; {} until recorded). */
const deployRecordSchema = z.object({ before: z.record(z.string(), z.string()).default({}) });

export const configsBeforeOf = (deploy: StepRow | undefined): Record<string, string> =>
  deploy ? deployRecordSchema.parse(deploy.params).before : {};

/** What a step reads of its run's params: the app, the config it moves to (or one per install), an action's inputs. */
const runParamsSchema = z.object({
  app_id: z.string().optional(),
  app_config_id: z.string().nullish(),
  /** an app rollback's config per install */
  targets: z.record(z.string(), z.string()).optional(),
  inputs: z.record(z.string(), z.unknown()).nullish(),
});
export type RunParams = z.infer<typeof runParamsSchema>;

export const runParamsOf = (wf: WorkflowRow): RunParams => runParamsSchema.parse(wf.params);
