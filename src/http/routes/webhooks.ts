// CONTRACT 4.1: the org's webhooks.
import { createWebhookBodySchema, patchWebhookBodySchema } from '../../domain/subscription.ts';
import * as svc from '../../services/webhooks.ts';
import * as history from '../../services/history.ts';
import * as dryRuns from '../../services/filter-dry-run.ts';
import { dryRunSchema, testFilterBodySchema, testWebhookFilterBodySchema } from '../../schemas/filters.ts';
import {
  attemptListQuerySchema,
  attemptPageSchema,
  disableBodySchema,
  enableBodySchema,
  pingResultSchema,
  recoverBodySchema,
  recoverySchema,
  recoveryStartedSchema,
  resendBodySchema,
  webhookCreatedSchema,
  webhookEnabledSchema,
  webhookListSchema,
  webhookSchema,
} from '../../schemas/webhooks.ts';
import { creates, defineRoute, deleteRoute, readRoute, reply, type RouteArgs } from '../api-route.ts';
import { checkTarget, TargetLookupError, TargetRefusedError } from '../../delivery/guard.ts';
import { exampleBodySchema } from '../../schemas/event-types.ts';
import type { z } from 'zod';

type WebhookBody = z.input<typeof webhookSchema>;
/** WebhookView types `interests` loosely (ops as strings); its schema checks each op on the way out. */
const body = (w: svc.WebhookView) => w as WebhookBody;

const HOOKS = '/v1/orgs/current/webhooks';

/** 404 before the body is read when the webhook is not the org's. */
const webhookExists = ({ ctx, orgId, params }: Pick<RouteArgs<'{webhook_id}'>, 'ctx' | 'orgId' | 'params'>) =>
  void svc.getWebhook(ctx, orgId, params.webhook_id);

/**
 * Why this process would refuse the webhook's target now, or null. A warning, not a refusal: the
 * guard decides at each attempt (DNS answers change, a worker may be started with
 * --allow-private-targets), but whoever registers a webhook that cannot be delivered hears so at once.
 */
async function targetWarning(url: string, allowPrivate: boolean): Promise<string | null> {
  try {
    // a slow resolver does not hold up the 201: no answer within a second, no warning
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<null>((ok) => (timer = setTimeout(() => ok(null), 1000)));
    await Promise.race([checkTarget(url, { allowPrivate }), late]).finally(() => clearTimeout(timer));
    return null;
  } catch (err) {
    if (err instanceof TargetRefusedError) {
      const how = allowPrivate ? '' : ' (start svc serve and svc worker with --allow-private-targets to deliver to local receivers)';
      return `${err.message}: this svc serve refuses it${how}; pings, resends and deliveries to it will fail`;
    }
    if (err instanceof TargetLookupError) return `${err.message}: deliveries fail until the host resolves`;
    return null;
  }
}
const tag = 'webhooks';

/** What a route that acts on one webhook (POST …/{webhook_id}/<verb>) states: its tag and scope, its audit (webhooks.<verb>). */
const onWebhook = (verb: string) => ({
  tag,
  scope: 'webhooks' as const,
  audit: { action: `webhooks.${verb}`, resource: 'webhook' },
});

/** A dry run changes nothing (CONTRACT 10.2): a read, not kept in the audit log; its work runs after, outside the engine's transaction. */
const dryRunAudit = { action: 'webhooks.test_filter', resource: 'webhook', unchanged: () => true };
const NOT_RUN_YET = { examined: 0, matched: 0, results: [] };
const DRY_RUN_DESCRIPTION =
  'What the subscription would receive of a CloudEvent given (`event`), a kept event (`event_id`), or a window of kept ' +
  'history (`since`, `until`: at most 10,000 events examined, the oldest first), with what decided each: `interests`, ' +
  '`match`, or the filter clause path. The filter is checked as on write. Nothing is sent or changed.';

/** What a ping or resend answers until its attempt is made (in settle, after the audit row is committed); never sent. */
const NOT_SENT_YET = { delivered: false, duration_ms: 0 };

export const webhookRoutes = [
  defineRoute({
    operationId: 'testFilter',
    method: 'post',
    path: `${HOOKS}/test-filter`,
    tag,
    scope: 'webhooks',
    audit: dryRunAudit,
    summary: 'Dry run of a filter, interests and match over an event or kept history',
    description: `${DRY_RUN_DESCRIPTION} Omitted interests and match are {"all_events": true} and org-wide.`,
    body: { schema: testFilterBodySchema },
    responses: { 200: { description: 'every event examined, with its verdict', schema: dryRunSchema } },
    errors: [400, 404],
    handle: ({ ctx, orgId, body: input }) => (dryRuns.checkTestFilter(ctx, orgId, input), reply.ok(NOT_RUN_YET)),
    settle: async ({ ctx, orgId, body: input }) => reply.ok(dryRuns.testFilter(ctx, orgId, input)),
  }),
  readRoute(
    {
      operationId: 'listWebhooks',
      path: HOOKS,
      tag,
      summary: 'List webhooks, newest first',
      ok: ['every webhook of the org', webhookListSchema],
      errors: [],
    },
    ({ ctx, orgId }) => svc.listWebhooks(ctx, orgId).map(body),
  ),
  defineRoute({
    operationId: 'createWebhook',
    method: 'post',
    path: HOOKS,
    tag,
    scope: 'webhooks',
    ...creates(
      'webhooks.create',
      'webhook',
      'webhook_id',
      'the webhook, with `warnings` when its target would be refused',
      webhookCreatedSchema,
    ),
    summary: 'Create a webhook',
    body: { schema: createWebhookBodySchema },
    errors: [409],
    handle: ({ ctx, orgId, body: input }) => reply.created(body(svc.createWebhook(ctx, orgId, input))),
    settle: async ({ ctx }, created) => {
      const warning = await targetWarning(created.body.webhook_url, ctx.config.allowPrivateTargets);
      return warning ? reply.created({ ...created.body, warnings: [warning] }) : created;
    },
  }),
  readRoute(
    {
      operationId: 'getWebhook',
      path: `${HOOKS}/{webhook_id}`,
      tag,
      summary: 'Get a webhook',
      ok: ['the webhook', webhookSchema],
      errors: [404],
    },
    ({ ctx, orgId, params }) => body(svc.getWebhook(ctx, orgId, params.webhook_id)),
  ),
  defineRoute({
    operationId: 'updateWebhook',
    method: 'patch',
    path: `${HOOKS}/{webhook_id}`,
    tag,
    scope: 'webhooks',
    audit: { action: 'webhooks.update', resource: 'webhook' },
    summary: 'Update a webhook',
    description: 'Naming interests or match replaces the subscription wholesale; a secret string rotates the secret, null removes it.',
    // 404 before validating the body
    before: webhookExists,
    body: { schema: patchWebhookBodySchema },
    responses: { 200: { description: 'the webhook', schema: webhookSchema } },
    errors: [404, 409],
    handle: ({ ctx, orgId, params, body: input }) => reply.ok(body(svc.patchWebhook(ctx, orgId, params.webhook_id, input))),
  }),
  deleteRoute({
    operationId: 'deleteWebhook',
    path: `${HOOKS}/{webhook_id}`,
    tag,
    scope: 'webhooks',
    audit: { action: 'webhooks.delete', resource: 'webhook' },
    summary: 'Delete a webhook',
    remove: ({ ctx, orgId, params }) => svc.deleteWebhook(ctx, orgId, params.webhook_id),
  }),
  defineRoute({
    operationId: 'pingWebhook',
    method: 'post',
    path: `${HOOKS}/{webhook_id}/ping`,
    ...onWebhook('ping'),
    summary: 'Send one ping event to this webhook alone',
    responses: { 200: { description: 'the outcome of the delivery', schema: pingResultSchema } },
    errors: [404],
    // the request is recorded (the webhook must exist) before the attempt, which changes nothing kept but its outcome
    handle: ({ ctx, orgId, params }) => (svc.getWebhook(ctx, orgId, params.webhook_id), reply.ok(NOT_SENT_YET)),
    settle: async ({ ctx, orgId, params }) => reply.ok(await svc.pingWebhook(ctx, orgId, params.webhook_id)),
  }),
  defineRoute({
    operationId: 'sendWebhookExample',
    method: 'post',
    path: `${HOOKS}/{webhook_id}/examples`,
    ...onWebhook('example'),
    summary: 'Send one signed example event of a type to this webhook alone',
    description:
      "The catalog's example of the type (GET /v1/event-types), of this org, with a fresh id and time and the extension " +
      '`svcexample: true`; no `svcorderkey` or `sequence`. Whatever the subscription, never kept in the history, counted ' +
      'like a ping. An unknown type is 400 naming the known ones.',
    before: webhookExists,
    body: { schema: exampleBodySchema },
    responses: { 200: { description: 'the outcome of the delivery', schema: pingResultSchema } },
    errors: [400, 404],
    // the request is recorded (the webhook and the type checked) before the attempt, as a ping's
    handle: ({ ctx, orgId, params, body: input }) => (
      svc.getWebhook(ctx, orgId, params.webhook_id), svc.exampleType(input.type), reply.ok(NOT_SENT_YET)
    ),
    settle: async ({ ctx, orgId, params, body: input }) => reply.ok(await svc.sendExample(ctx, orgId, params.webhook_id, input.type)),
  }),
  defineRoute({
    operationId: 'disableWebhook',
    method: 'post',
    path: `${HOOKS}/{webhook_id}/disable`,
    ...onWebhook('disable'),
    summary: 'Stop sending to this webhook',
    description:
      "No attempts from now on (queued ones are dropped); its events are still kept. The org's " +
      'other webhooks that subscribe hear `disabled` (com.svc.webhook.delivery.v1); `note` becomes ' +
      'delivery_status.disabled_reason ("manual" without one).',
    before: webhookExists,
    body: { schema: disableBodySchema, optional: true },
    responses: { 200: { description: 'the webhook, disabled', schema: webhookSchema } },
    errors: [400, 404],
    handle: ({ ctx, orgId, params, body: input }) => reply.ok(body(svc.disableWebhook(ctx, orgId, params.webhook_id, input.note))),
  }),
  defineRoute({
    operationId: 'enableWebhook',
    method: 'post',
    path: `${HOOKS}/{webhook_id}/enable`,
    ...onWebhook('enable'),
    summary: 'Send to this webhook again, after a ping that is delivered',
    description:
      'A ping first: not delivered → 409 conflict with its error, still disabled. Delivered → ' +
      "active, `enabled` to the org's other webhooks that subscribe, and with `recover: true` a " +
      'recovery (only failed) since delivery_status.recover_since: every event that failed or was ' +
      'missed arrives once, with X-Svc-Recovery.',
    before: webhookExists,
    body: { schema: enableBodySchema, optional: true },
    responses: { 200: { description: 'the webhook, active, and the recovery started', schema: webhookEnabledSchema } },
    errors: [400, 404, 409],
    // the ping before the change (its refusal is kept like any other), the enable in the change
    prepare: ({ ctx, orgId, params, body: input }) => svc.pingBeforeEnable(ctx, orgId, params.webhook_id, input),
    handle: ({ ctx, orgId, params, body: input, prepared }) => {
      const r = svc.enableAfterPing(ctx, orgId, params.webhook_id, input, prepared);
      return reply.ok({ ...r, webhook: body(r.webhook) });
    },
  }),
  defineRoute({
    operationId: 'testWebhookFilter',
    method: 'post',
    path: `${HOOKS}/{webhook_id}/test-filter`,
    tag,
    scope: 'webhooks',
    audit: dryRunAudit,
    summary: "Dry run of this webhook's subscription over an event or kept history",
    description: `${DRY_RUN_DESCRIPTION} The webhook's own interests, match and filter; a \`filter\` given is tried in place of its own.`,
    before: webhookExists,
    body: { schema: testWebhookFilterBodySchema },
    responses: { 200: { description: 'every event examined, with its verdict', schema: dryRunSchema } },
    errors: [400, 404],
    handle: ({ ctx, orgId, params, body: input }) => (dryRuns.checkTestFilter(ctx, orgId, input, params.webhook_id), reply.ok(NOT_RUN_YET)),
    settle: async ({ ctx, orgId, params, body: input }) => reply.ok(dryRuns.testWebhookFilter(ctx, orgId, params.webhook_id, input)),
  }),
  readRoute(
    {
      operationId: 'listWebhookAttempts',
      path: `${HOOKS}/{webhook_id}/attempts`,
      tag,
      summary: "This webhook's kept delivery attempts, newest first",
      query: attemptListQuerySchema,
      ok: ['a page of attempts', attemptPageSchema],
      errors: [400, 404],
    },
    ({ ctx, orgId, params, query }) => history.listAttempts(ctx, orgId, params.webhook_id, query),
  ),
  defineRoute({
    operationId: 'recoverWebhook',
    method: 'post',
    path: `${HOOKS}/{webhook_id}/recover`,
    tag,
    scope: 'webhooks',
    audit: { action: 'webhooks.recover', resource: 'recovery', id: (r) => r.body.recovery_id },
    summary: 'Attempt again, at this webhook alone, the kept events of a window that it missed',
    description:
      'One new attempt for every kept event of the window that the webhook matches now, emitted ' +
      'after it was created (backfill: older ones too) and (only_failed, the default) whose attempts ' +
      'at it all failed or that it never had. Durable like any delivery; each attempt carries the ' +
      "event's body and id and X-Svc-Recovery: <recovery_id>. Paced: one running recovery per " +
      'webhook (409 conflict), 4 per org (409 limit_exceeded); answered within 1 s, `events` ' +
      'possibly still growing. Instead of since/until, order_key with after_sequence (and until_sequence, ' +
      'inclusive) fills exactly a gap of one ordering key (CONTRACT 10.1).',
    before: webhookExists,
    body: { schema: recoverBodySchema },
    responses: { 202: { description: 'the recovery, started', schema: recoveryStartedSchema } },
    errors: [404, 409],
    handle: ({ ctx, orgId, params, body: input }) => reply.accepted(history.startRecovery(ctx, orgId, params.webhook_id, input)),
    settle: async ({ ctx, orgId, params }, started) =>
      reply.accepted(await history.recoveryAnswer(ctx, orgId, params.webhook_id, started.body.recovery_id)),
  }),
  readRoute(
    {
      operationId: 'getWebhookRecovery',
      path: `${HOOKS}/{webhook_id}/recoveries/{recovery_id}`,
      tag,
      summary: 'How far a recovery has come',
      ok: ['the recovery', recoverySchema],
      errors: [404],
    },
    ({ ctx, orgId, params }) => history.getRecovery(ctx, orgId, params.webhook_id, params.recovery_id),
  ),
  defineRoute({
    operationId: 'resendEvent',
    method: 'post',
    path: `${HOOKS}/{webhook_id}/resend`,
    ...onWebhook('resend'),
    summary: 'Send one kept event to this webhook now, whatever its subscription',
    description:
      "The event's own body and id, a fresh webhook-timestamp and X-Svc-Recovery: resend; counted in delivery_status and the attempt log.",
    before: webhookExists,
    body: { schema: resendBodySchema },
    responses: { 200: { description: 'the outcome of the delivery', schema: pingResultSchema } },
    errors: [404, 409],
    handle: ({ ctx, orgId, params, body: input }) => (
      history.resendable(ctx, orgId, params.webhook_id, input.event_id), reply.ok(NOT_SENT_YET)
    ),
    settle: async ({ ctx, orgId, params, body: input }) =>
      reply.ok(await history.resendEvent(ctx, orgId, params.webhook_id, input.event_id)),
  }),
];
