// Response bodies of the /v1 API (CONTRACT 3, 4), beside the request schemas of ./schemas.ts and
// src/domain/subscription.ts. Every success body goes out through its schema (src/http/api-route.ts)
// and the OpenAPI document is generated from the same schemas (src/http/openapi.ts). Each schema
// registered in `apiSchemas` becomes a named component (`#/components/schemas/<id>`).
import { z } from 'zod';
import type { ErrorDetail } from '../domain/errors.ts';
import type { Status } from '../domain/status.ts';
import type { ParentRef } from '../domain/facts.ts';
import type { ExecutionType, OwnerType, Verdict } from '../domain/status.ts';
import type { ConfigDiff, FieldChange } from '../domain/config-diff.ts';
import type { AttemptResult } from '../delivery/client.ts';
import { disableAfterSchema, interestsSchema, storedMatchSchema } from '../domain/subscription.ts';
import type { DeliveryStatusView } from '../services/webhooks.ts';
import { storedActionSpecSchema, storedComponentSpecSchema } from './schemas.ts';
import {
  approvalViewSchema,
  type EXECUTION_TYPES,
  installViewSchema,
  type OWNER_TYPES,
  parentRefSchema as parentRefViewSchema,
  STATUSES,
  statusSchema as status,
  stepViewSchema,
  timestamp as viewTimestamp,
  type VERDICTS,
  workflowSummaryViewSchema,
  workflowViewSchema,
} from '../services/view-schemas.ts';

/** The named schemas of the document's `components.schemas`. */
export const apiSchemas = z.registry<{ id?: string; description?: string }>();

/** A description for the document (kept in `apiSchemas`, the registry the document is made with). */
function described<S extends z.ZodType>(schema: S, description: string): S {
  apiSchemas.add(schema as z.ZodType, { description });
  return schema;
}

const timestamp = described(viewTimestamp, 'ISO 8601 timestamp');
const labels = z.record(z.string(), z.string());
const json = z.record(z.string(), z.unknown());

// ------------------------------------------------------------------ errors (CONTRACT 3)

export const ERROR_CODES = [
  'invalid_request',
  'unauthorized',
  'forbidden',
  'not_found',
  'conflict',
  'limit_exceeded',
  'vetoed',
  'payload_too_large',
  'unsupported_media_type',
  'internal',
] as const;

export const errorDetailSchema = z
  .object({ path: described(z.string(), 'the field path, dotted (`(body)` for the body as a whole)'), message: z.string() })
  .register(apiSchemas, { id: 'ErrorDetail' });

export const errorSchema = z
  .object({
    error: z.enum(ERROR_CODES),
    message: z.string(),
    details: z.array(errorDetailSchema).optional(),
  })
  .register(apiSchemas, { id: 'Error', description: 'Every error response (CONTRACT 3)' });

// ------------------------------------------------------------------ webhooks (CONTRACT 4.1)

export const deliveryStatusSchema = z
  .object({
    last_attempt_at: timestamp.nullable(),
    last_outcome: z.enum(['success', 'failure']).nullable(),
    last_status_code: z.number().int().nullable(),
    last_error: z.string().nullable(),
    consecutive_failures: z.number().int(),
    attempts_total: z.number().int(),
    failures_total: z.number().int(),
    state: described(
      z.enum(['active', 'failing', 'disabled']),
      'the delivery watchdog: failing from the first `failing` event until a success; disabled: no attempts',
    ),
    failing_since: described(timestamp.nullable(), 'the first failed attempt of the current streak'),
    recover_since: described(
      timestamp.nullable(),
      'the time of the earliest event that failed in the current streak: where a recovery should start',
    ),
    disabled_at: timestamp.nullable(),
    disabled_reason: described(
      z.string().nullable(),
      '"auto: <n> consecutive failures since <failing_since>", the note given to disable, or "manual"',
    ),
  })
  .register(apiSchemas, { id: 'DeliveryStatus' });

export const webhookSchema = z
  .object({
    webhook_id: z.string(),
    webhook_url: z.string(),
    has_secret: z.boolean(),
    interests: interestsSchema.register(apiSchemas, { id: 'Interests' }),
    match: storedMatchSchema.register(apiSchemas, { id: 'Match' }).nullable(),
    created_at: timestamp,
    updated_at: timestamp,
    previous_secret_expires_at: described(timestamp.nullable(), 'while a rotated-out secret still signs: when it stops'),
    disable_after: disableAfterSchema.register(apiSchemas, { id: 'DisableAfter' }).nullable(),
    delivery_status: deliveryStatusSchema,
  })
  .register(apiSchemas, { id: 'Webhook' });

export const webhookCreatedSchema = webhookSchema
  .extend({
    warnings: described(
      z.array(z.string()).optional(),
      'things that will stop its deliveries, found when it was created (a target this svc serve refuses: a loopback or private address without --allow-private-targets, a host that does not resolve); the webhook is created all the same',
    ),
  })
  .register(apiSchemas, { id: 'WebhookCreated' });

export const webhookListSchema = z.array(webhookSchema);

export const webhookEnabledSchema = z
  .object({
    webhook: webhookSchema,
    recovery_id: described(
      z.string().optional(),
      'with `recover: true` and events to recover: the recovery started (GET …/recoveries/{recovery_id})',
    ),
  })
  .register(apiSchemas, { id: 'WebhookEnabled' });

export const pingResultSchema = z
  .object({
    delivered: z.boolean(),
    status: described(z.number().int().optional(), "the receiver's HTTP status, when it answered"),
    error: z.string().optional(),
    duration_ms: z.number(),
  })
  .register(apiSchemas, { id: 'PingResult' });

// ------------------------------------------------------------------ history, attempts, recovery (CONTRACT 4.5)

export const cloudEventSchema = z
  .looseObject({
    specversion: z.string(),
    id: z.string(),
    source: z.string(),
    type: z.string(),
    subject: z.string().optional(),
    time: z.string().optional(),
  })
  .register(apiSchemas, { id: 'CloudEvent', description: 'a CloudEvent exactly as delivered (CONTRACT 6.2)' });

const nextCursor = described(z.string().nullable(), 'pass as `after` for the next page; null on the last page');

export const eventPageSchema = z
  .object({ data: z.array(cloudEventSchema), next_cursor: nextCursor })
  .register(apiSchemas, { id: 'EventPage' });

/** What an attempt kept of the receiver's answer (CONTRACT 4.5, new in 0.3). */
const attemptResponseSchema = z
  .object({
    status: z.number().int(),
    headers: described(z.record(z.string(), z.string()), 'lowercase names; at most 8 KiB of them'),
    headers_truncated: described(z.literal(true), 'present when headers past 8 KiB were left out').optional(),
    body: described(z.string(), 'the first 4 KiB of the body: UTF-8 text, or base64 with body_encoding'),
    body_encoding: z.literal('base64').optional(),
    body_truncated: z.boolean(),
  })
  .register(apiSchemas, { id: 'AttemptResponse' });

export const attemptSchema = z
  .object({
    event_id: z.string(),
    type: z.string(),
    subject: z.string().nullable(),
    attempted_at: timestamp,
    outcome: z.enum(['success', 'failure']),
    status_code: z.number().int().nullable(),
    error: z.string().nullable(),
    duration_ms: z.number(),
    recovery_id: described(z.string().nullable(), "the recovery that made it, 'resend', or null for the event's own attempt"),
    request: described(
      z.object({ headers: z.record(z.string(), z.string()) }).nullable(),
      'with ?include=request: the headers svc sent (each signature cut to its first 8 characters); null when none were kept',
    ).optional(),
    response: described(
      attemptResponseSchema.nullable(),
      'with ?include=response: what the receiver answered; null when no response came (or none was kept)',
    ).optional(),
  })
  .register(apiSchemas, { id: 'Attempt' });

export const attemptPageSchema = z
  .object({ data: z.array(attemptSchema), next_cursor: nextCursor })
  .register(apiSchemas, { id: 'AttemptPage' });

export const auditEntrySchema = z
  .object({
    id: z.string(),
    at: described(z.string(), 'when the change was made (ISO 8601)'),
    actor: z
      .object({ token_id: z.string().nullable(), token_name: z.string().nullable() })
      .describe('the API token that made it (token_id null and token_name "local": a database command)'),
    action: described(z.string(), 'the operation: webhooks.create, rollbacks.create, steps.approve, configs.veto, tokens.revoke, …'),
    resource_type: z.string().nullable(),
    resource_id: described(z.string().nullable(), 'the id of what it created or changed'),
    status: described(z.number().int().nullable(), 'the HTTP status answered (a refused write is kept too); null for a database command'),
  })
  .register(apiSchemas, { id: 'AuditEntry' });

export const auditPageSchema = z
  .object({ data: z.array(auditEntrySchema), next_cursor: nextCursor })
  .register(apiSchemas, { id: 'AuditPage' });

export const recoveryStartedSchema = z
  .object({ recovery_id: z.string(), events: described(z.number().int(), 'how many events it attempts') })
  .register(apiSchemas, { id: 'RecoveryStarted' });

export const recoverySchema = z
  .object({
    recovery_id: z.string(),
    state: z.enum(['running', 'done']),
    events: z.number().int(),
    attempted: z.number().int(),
    succeeded: z.number().int(),
    failed: z.number().int(),
  })
  .register(apiSchemas, { id: 'Recovery' });

// ------------------------------------------------------------------ apps, configs, branches (CONTRACT 4.2)

export const appSchema = z
  .object({
    app_id: z.string(),
    org_id: described(z.string().optional(), 'returned by GET only'),
    name: z.string(),
    created_at: timestamp,
  })
  .register(apiSchemas, { id: 'App' });

export const appListSchema = z.array(appSchema);

const configBodyShape = {
  sandbox: json.optional(),
  components: z.array(storedComponentSpecSchema.register(apiSchemas, { id: 'ComponentSpec' })),
  actions: z.array(storedActionSpecSchema.register(apiSchemas, { id: 'ActionSpec' })).optional(),
  inputs: json.optional(),
};

export const vetoViewSchema = z.object({ reason: z.string(), at: timestamp }).register(apiSchemas, {
  id: 'Veto',
  description: 'why and since when an app config is vetoed: applying it is 409 vetoed (CONTRACT 4.3)',
});

export const appConfigViewSchema = z
  .object({
    app_config_id: z.string(),
    app_id: z.string(),
    version: z.number().int(),
    ...configBodyShape,
    created_at: timestamp,
    vetoed: vetoViewSchema.nullable(),
  })
  .register(apiSchemas, { id: 'AppConfig' });

export const appConfigListSchema = z.array(appConfigViewSchema);

export const branchSchema = z
  .object({
    app_branch_id: z.string(),
    app_id: z.string(),
    org_id: z.string(),
    name: z.string(),
    install_groups: z.array(
      z.object({
        name: z.string(),
        install_ids: z.array(z.string()).optional(),
        selector: z.object({ match_labels: labels }).optional(),
      }),
    ),
    created_at: timestamp,
  })
  .register(apiSchemas, { id: 'AppBranch' });

// ------------------------------------------------------------------ workflows (CONTRACT 4.2)

export { STATUSES };

// the workflow views are the services' (src/services/view-schemas.ts), registered here as components
export const parentRefSchema = parentRefViewSchema.register(apiSchemas, { id: 'ParentRef' });
export const approvalSchema = approvalViewSchema.register(apiSchemas, { id: 'Approval' });
export const stepSchema = stepViewSchema.register(apiSchemas, { id: 'Step' });
export const workflowSummarySchema = workflowSummaryViewSchema.register(apiSchemas, { id: 'WorkflowSummary' });
export const workflowSummaryListSchema = z.array(workflowSummarySchema);
export const workflowSchema = workflowViewSchema.register(apiSchemas, { id: 'Workflow' });

// ------------------------------------------------------------------ installs (CONTRACT 4.2)

export const installSchema = installViewSchema.register(apiSchemas, { id: 'Install' });

export const installListSchema = z.array(installSchema);

// ------------------------------------------------------------------ rollback (CONTRACT 4.3)

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

const fieldChangeSchema = z
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

export const configUpdatePlannedSchema = z
  .object({ plan: configPlanSchema, applied: z.literal(false) })
  .register(apiSchemas, { id: 'AppConfigUpdatePlanned', description: 'plan_only: nothing changed and no workflow started' });

export const configUpdateAppliedSchema = z
  .object({ plan: configPlanSchema, applied: z.literal(true), workflow_id: z.string(), version_id: z.string() })
  .register(apiSchemas, { id: 'AppConfigUpdateApplied' });

const configDiffSchema = z.object(configDiffShape).register(apiSchemas, { id: 'AppConfigDiff' });

export const fleetRollbackPlanSchema = z
  .object({
    installs: z.array(
      z.object({
        install_id: z.string(),
        install_name: z.string(),
        labels,
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
      }),
    ),
    skipped: z.array(z.object({ install_id: z.string(), reason: z.string() })),
  })
  .register(apiSchemas, { id: 'FleetRollbackPlan' });

export const fleetRollbackPlannedSchema = z
  .object({ plan: fleetRollbackPlanSchema, applied: z.literal(false) })
  .register(apiSchemas, { id: 'FleetRollbackPlanned', description: 'plan_only: nothing changed and no workflow started' });

export const fleetRollbackStartedSchema = z
  .object({ run_id: z.string(), workflow_id: z.string(), status, plan: fleetRollbackPlanSchema, applied: z.literal(true) })
  .register(apiSchemas, { id: 'FleetRollback', description: 'an app_rollback workflow owned by the app' });

export const branchRunResultSchema = z
  .object({ run_id: z.string(), workflow_id: z.string(), app_branch_id: z.string(), app_config_id: z.string(), status })
  .register(apiSchemas, { id: 'AppBranchRun' });

// ------------------------------------------------------------------ the API description itself

export const openApiDocumentSchema = described(z.record(z.string(), z.unknown()), 'this OpenAPI 3.1 document');

// ------------------------------------------------------------------ one vocabulary: the enums above are the store's

type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const sameTypes: [
  Same<(typeof STATUSES)[number], Status>,
  Same<(typeof OWNER_TYPES)[number], OwnerType>,
  Same<(typeof EXECUTION_TYPES)[number], ExecutionType>,
  Same<(typeof VERDICTS)[number], Verdict>,
  Same<z.infer<typeof parentRefSchema>, ParentRef>,
  Same<z.infer<typeof deliveryStatusSchema>, DeliveryStatusView>,
  Same<z.infer<typeof errorDetailSchema>, ErrorDetail>,
  Same<z.infer<typeof fieldChangeSchema>['op'], FieldChange['op']>,
  Same<z.infer<typeof pingResultSchema>, AttemptResult>,
  Same<
    Omit<z.infer<typeof versionDiffSchema>, 'version_id' | 'from_app_config_id' | 'to_app_config_id'>['components']['added'],
    ConfigDiff['components']['added']
  >,
] = [true, true, true, true, true, true, true, true, true, true];
void sameTypes;
