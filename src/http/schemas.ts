// Request bodies of the /v1 API (apps, installs, workflows, rollback). One schema validates a
// request and documents it in the OpenAPI document. Webhook bodies live in src/domain/subscription.ts.
import { z } from 'zod';
import { labelsSchema as labels } from '../domain/limits.ts';
import {
  bakeMs,
  GATE_ACTIONS,
  GATE_VERDICTS,
  MAX_BAKE_MS,
  MAX_GATE_FOR_MS,
  MAX_PARALLEL,
  MAX_WINDOW_TIMEOUT_MS,
  MIN_WINDOW_TIMEOUT_MS,
  ON_FAILURE,
  type HealthGate,
  type RolloutPolicy,
} from '../domain/rollout.ts';
import { durationMs } from '../domain/duration.ts';
import { verificationListSchema } from './verification-schema.ts';

const name = z.string().trim().min(1).max(200);
/** Labels as stored: read back without the limits of CONTRACT 8 (configs made before them still read). */
const storedLabels = z.record(z.string(), z.string());
const id = z.string().min(1).max(64);

export const createAppSchema = z.strictObject({ name });

const componentSpecOf = (l: z.ZodType<Record<string, string>>) =>
  z.strictObject({
    name,
    type: z.string().max(200).optional(),
    labels: l.optional(),
    values: z.record(z.string(), z.unknown()).optional(),
  });

const actionSpecOf = (l: z.ZodType<Record<string, string>>) =>
  z.strictObject({
    name,
    labels: l.optional(),
    inputs: z.record(z.string().min(1), z.strictObject({ required: z.boolean().optional() })).optional(),
  });

/** A component of a config as a request sets it (labels within CONTRACT 8). */
export const componentSpecSchema = componentSpecOf(labels);
/** An action of a config as a request sets it (labels within CONTRACT 8). */
export const actionSpecSchema = actionSpecOf(labels);
/** The same as stored and returned. */
export const storedComponentSpecSchema = componentSpecOf(storedLabels);
export const storedActionSpecSchema = actionSpecOf(storedLabels);

export const appConfigSchema = z
  .strictObject({
    sandbox: z.record(z.string(), z.unknown()).optional(),
    components: z.array(componentSpecSchema),
    actions: z.array(actionSpecSchema).optional(),
    inputs: z.record(z.string(), z.unknown()).optional(),
  })
  .superRefine((c, ctx) => {
    const dup = (list: Array<{ name: string }>, path: string) => {
      const seen = new Set<string>();
      list.forEach((x, i) => {
        if (seen.has(x.name)) ctx.addIssue({ code: 'custom', path: [path, i, 'name'], message: `duplicate ${path} name ${x.name}` });
        seen.add(x.name);
      });
    };
    dup(c.components, 'components');
    dup(c.actions ?? [], 'actions');
  });

export const selectorSchema = z.strictObject({
  match_labels: labels.refine((l) => Object.keys(l).length > 0, 'match_labels must not be empty'),
});

export const createBranchSchema = z.strictObject({
  name,
  install_groups: z
    .array(
      z
        .strictObject({ name, install_ids: z.array(id).optional(), selector: selectorSchema.optional() })
        .refine((g) => g.install_ids !== undefined || g.selector !== undefined, 'a group needs install_ids or a selector'),
    )
    .min(1),
});

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
export const approvalSchema = z.strictObject({ response: z.enum(['approved', 'rejected']), note: z.string().max(4000).optional() });
export const configUpdateSchema = z.strictObject({ app_config_id: id, plan_only: z.boolean().optional() });
/** A run's health gate (CONTRACT 4.3): the bake from 0s to 24h, the verdicts that trip it, what then, and how long a bad one must last (`for`, 0s to 1h). */
export const healthGateSchema = z
  .strictObject({
    bake: z
      .string()
      .refine((b) => bakeMs(b) !== null, 'a duration such as 0s, 90s, 10m or 1h')
      .refine((b) => (bakeMs(b) ?? 0) <= MAX_BAKE_MS, 'at most 24h'),
    on: z.array(z.enum(GATE_VERDICTS)).min(1).optional(),
    action: z.enum(GATE_ACTIONS).optional(),
    for: z
      .string()
      .refine((b) => bakeMs(b) !== null, 'a duration such as 0s, 3s or 5m')
      .refine((b) => (bakeMs(b) ?? 0) <= MAX_GATE_FOR_MS, 'at most 1h')
      .optional(),
  })
  .transform(
    (g): HealthGate => ({
      bake: g.bake,
      bake_ms: bakeMs(g.bake)!,
      on: [...new Set(g.on ?? GATE_VERDICTS)],
      action: g.action ?? 'halt',
      for: g.for ?? '0s',
      for_ms: g.for === undefined ? 0 : bakeMs(g.for)!,
    }),
  );

/** A run's rollout policy (CONTRACT 4.3 "Rollout policy"): batches, a failure budget, what a failing group does, how long an install may wait for a change window. */
export const rolloutPolicySchema = z
  .strictObject({
    max_parallel: z.number().int().min(1).max(MAX_PARALLEL).optional(),
    failure_budget: z.strictObject({ max_failed_pct: z.number().min(0).max(100) }).optional(),
    on_failure: z.enum(ON_FAILURE).optional(),
    window_timeout: z
      .string()
      .refine((d) => durationMs(d) !== null, 'a duration such as 30m, 24h or 7d')
      .refine((d) => (durationMs(d) ?? 0) >= MIN_WINDOW_TIMEOUT_MS && (durationMs(d) ?? 0) <= MAX_WINDOW_TIMEOUT_MS, 'from 1m to 7d')
      .optional(),
  })
  .transform(
    (r): RolloutPolicy => ({
      max_parallel: r.max_parallel ?? null,
      max_failed_pct: r.failure_budget?.max_failed_pct ?? 0,
      on_failure: r.on_failure ?? null,
      window_timeout: r.window_timeout ?? '24h',
      window_timeout_ms: r.window_timeout === undefined ? 24 * 3_600_000 : durationMs(r.window_timeout)!,
    }),
  );

export const branchRunSchema = z.strictObject({
  app_config_id: id,
  skip_builds: z.boolean().optional(),
  health_gate: healthGateSchema.optional(),
  rollout: rolloutPolicySchema.optional(),
  verification: verificationListSchema.optional(),
});

export const fleetRollbackSchema = z.strictObject({
  to: z.union([z.literal('previous'), id]),
  install_ids: z.array(id).min(1).optional(),
  selector: selectorSchema.optional(),
  plan_only: z.boolean().optional(),
  health_gate: healthGateSchema.optional(),
  rollout: rolloutPolicySchema.optional(),
  verification: verificationListSchema.optional(),
  approval: z.enum(['per_group', 'none']).optional(),
});

export const vetoSchema = z.strictObject({ reason: z.string().trim().min(1).max(1000) });

// ------------------------------------------------------------------ history, attempts, recovery (CONTRACT 4.5)

const timeBound = (what: string) =>
  z.string().min(1).max(64).describe(`${what}: an ISO 8601 time, or a duration back from now (e.g. 2h, 30m, 7d)`);
const pageCursor = z.string().min(1).max(32).describe('the next_cursor of the previous page');
const pageLimit = z
  .string()
  .regex(/^\d+$/, 'a whole number from 1 to 500')
  .transform(Number)
  .pipe(z.number().int().min(1, 'a whole number from 1 to 500').max(500, 'a whole number from 1 to 500'))
  .describe('page size, 1 to 500 (default 100)');

export const appListQuerySchema = z.object({
  after: id.describe('the app_id of the last app of the previous page: the apps created before it').optional(),
  limit: pageLimit.optional(),
});

export const eventListQuerySchema = z.object({
  since: timeBound('kept events emitted at or after').optional(),
  until: timeBound('events emitted before').optional(),
  type: z.string().min(1).max(200).describe('the CloudEvents type').optional(),
  subject_prefix: z.string().min(1).max(1000).describe('the CloudEvents subject starts with this').optional(),
  after: pageCursor.optional(),
  limit: pageLimit.optional(),
});

export const auditListQuerySchema = z.object({
  since: timeBound('changes made at or after').optional(),
  until: timeBound('changes made before').optional(),
  actor: z.string().min(1).max(64).describe('a token id: the changes made with that token').optional(),
  action: z.string().min(1).max(100).describe('the operation, e.g. webhooks.create, rollbacks.create, steps.approve').optional(),
  resource_id: z.string().min(1).max(200).describe('the id of what was created or changed').optional(),
  after: pageCursor.optional(),
  limit: pageLimit.optional(),
});

export const attemptListQuerySchema = z.object({
  since: timeBound('attempts made at or after').optional(),
  until: timeBound('attempts made before').optional(),
  outcome: z.enum(['success', 'failure']).optional(),
  event_id: z.string().min(1).max(200).optional(),
  after: pageCursor.optional(),
  limit: pageLimit.optional(),
  include: z
    .string()
    .regex(/^(request|response)(,(request|response))?$/, 'request, response, or request,response')
    .describe(
      'request,response: each attempt with the headers svc sent and what the receiver answered (status, headers, first 4 KiB of the body)',
    )
    .optional(),
});

export const recoverBodySchema = z.strictObject({
  since: timeBound('kept events emitted at or after'),
  until: timeBound('events emitted before').optional(),
  only_failed: z
    .boolean()
    .describe('only the events whose attempts at this webhook all failed, or that it never had (default true)')
    .optional(),
  backfill: z.boolean().describe('events emitted before the webhook was created too (default false)').optional(),
});

export const resendBodySchema = z.strictObject({ event_id: z.string().min(1).max(200) });

/** POST …/webhooks/{id}/disable (CONTRACT 4.1): the note becomes `disabled_reason`. */
export const disableBodySchema = z.strictObject({
  note: z
    .string({ error: 'note must be a string' })
    .min(1, { error: 'note must not be empty' })
    .max(1000, { error: 'note must be at most 1000 characters' })
    .optional(),
});

/** POST …/webhooks/{id}/enable (CONTRACT 4.1). */
export const enableBodySchema = z.strictObject({
  recover: z
    .boolean({ error: 'recover must be a boolean' })
    .describe('start a recovery (only failed) since recover_since once enabled')
    .optional(),
});
