// Webhooks (CONTRACT 4.1) and their attempts and recoveries (CONTRACT 4.5). In: the bodies of
// disable, enable, recover and resend and the attempts' query (create and update: src/domain/subscription.ts,
// which dispatch reads too). Out: the webhook, its delivery status, a ping's or a resend's outcome,
// a page of attempts, a recovery.
import { z } from 'zod';
import { deliverySchema, disableAfterSchema, interestsSchema, storedMatchSchema } from '../domain/subscription.ts';
import { apiSchemas, described, pagedQuery, pageOf, timeBoundSchema, timestamp } from './common.ts';

// ------------------------------------------------------------------ In

export const attemptListQuerySchema = pagedQuery('attempts made at or after', 'attempts made before', {
  outcome: z.enum(['success', 'failure']).optional(),
  event_id: z.string().min(1).max(200).optional(),
}).extend({
  include: z
    .string()
    .regex(/^(request|response)(,(request|response))?$/, 'request, response, or request,response')
    .describe(
      'request,response: each attempt with the headers svc sent and what the receiver answered (status, headers, first 4 KiB of the body)',
    )
    .optional(),
});

/** An ordering key (CONTRACT 10.1): an install, workflow, runner or webhook id. */
export const orderKeySchema = z
  .string()
  .min(1)
  .max(200)
  .describe('an ordering key (svcorderkey): an install, workflow, runner or webhook id');

const sequenceSchema = (what: string) => z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).describe(what);

export const recoverBodySchema = z
  .strictObject({
    since: timeBoundSchema('kept events emitted at or after (or order_key and after_sequence instead)').optional(),
    until: timeBoundSchema('events emitted before').optional(),
    order_key: orderKeySchema.optional(),
    after_sequence: sequenceSchema('with order_key: the events of the key whose sequence is above this').optional(),
    until_sequence: sequenceSchema('with order_key: ... and at most this (inclusive; default: no bound)').optional(),
    only_failed: z
      .boolean()
      .describe('only the events whose attempts at this webhook all failed, or that it never had (default true)')
      .optional(),
    backfill: z.boolean().describe('events emitted before the webhook was created too (default false)').optional(),
  })
  .superRefine((b, ctx) => {
    const issue = (path: string, message: string) => ctx.addIssue({ code: 'custom', path: [path], message });
    if (b.order_key === undefined) {
      if (b.since === undefined) issue('since', 'since is required (or order_key and after_sequence)');
      if (b.after_sequence !== undefined) issue('after_sequence', 'only with order_key');
      if (b.until_sequence !== undefined) issue('until_sequence', 'only with order_key');
      return;
    }
    if (b.since !== undefined) issue('since', 'not with order_key (a window of sequences instead)');
    if (b.until !== undefined) issue('until', 'not with order_key (until_sequence instead)');
    if (b.after_sequence === undefined) issue('after_sequence', 'after_sequence is required with order_key');
    else if (b.until_sequence !== undefined && b.until_sequence <= b.after_sequence) issue('until_sequence', 'not above after_sequence');
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

// ------------------------------------------------------------------ Out

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
    filter: described(
      z.record(z.string(), z.unknown()).nullable(),
      'the payload filter over the CloudEvent as delivered (CONTRACT 10.2); null: none',
    ),
    delivery: deliverySchema.register(apiSchemas, { id: 'WebhookDelivery' }).nullable(),
    delivery_status: deliveryStatusSchema,
  })
  .register(apiSchemas, { id: 'Webhook' });

export const webhookCreatedSchema = webhookSchema
  .extend({
    warnings: described(
      z.array(z.string()).optional(),
      'things that will stop its deliveries, found when it was created (a target this svc serve refuses: a loopback or private ' +
        'address without --allow-private-targets, a host that does not resolve); the webhook is created all the same',
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

export const attemptPageSchema = pageOf(attemptSchema, 'AttemptPage');

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
