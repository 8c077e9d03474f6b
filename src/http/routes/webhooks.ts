// CONTRACT 4.1: the org's webhooks.
import { createWebhookBodySchema, patchWebhookBodySchema } from '../../domain/subscription.ts';
import * as svc from '../../services/webhooks.ts';
import { defineRoute, reply } from '../route.ts';
import { pingResultSchema, webhookListSchema, webhookSchema } from '../responses.ts';
import type { z } from 'zod';

type WebhookBody = z.input<typeof webhookSchema>;
/** WebhookView types `interests` loosely (ops as strings); its schema checks each op on the way out. */
const body = (w: svc.WebhookView) => w as WebhookBody;

const HOOKS = '/v1/orgs/current/webhooks';
const tag = 'webhooks';

export const webhookRoutes = [
  defineRoute({
    operationId: 'listWebhooks',
    method: 'get',
    path: HOOKS,
    tag,
    summary: 'List webhooks, newest first',
    responses: { 200: { description: 'every webhook of the org', schema: webhookListSchema } },
    errors: [],
    handle: ({ ctx, orgId }) => reply.ok(svc.listWebhooks(ctx, orgId).map(body)),
  }),
  defineRoute({
    operationId: 'createWebhook',
    method: 'post',
    path: HOOKS,
    tag,
    summary: 'Create a webhook',
    body: { schema: createWebhookBodySchema },
    responses: { 201: { description: 'the webhook', schema: webhookSchema } },
    errors: [409],
    handle: ({ ctx, orgId, body: input }) => reply.created(body(svc.createWebhook(ctx, orgId, input))),
  }),
  defineRoute({
    operationId: 'getWebhook',
    method: 'get',
    path: `${HOOKS}/{webhook_id}`,
    tag,
    summary: 'Get a webhook',
    responses: { 200: { description: 'the webhook', schema: webhookSchema } },
    errors: [404],
    handle: ({ ctx, orgId, params }) => reply.ok(body(svc.getWebhook(ctx, orgId, params.webhook_id))),
  }),
  defineRoute({
    operationId: 'updateWebhook',
    method: 'patch',
    path: `${HOOKS}/{webhook_id}`,
    tag,
    summary: 'Update a webhook',
    description: 'Naming interests or match replaces the subscription wholesale; a secret string rotates the secret, null removes it.',
    // 404 before validating the body
    before: ({ ctx, orgId, params }) => void svc.getWebhook(ctx, orgId, params.webhook_id),
    body: { schema: patchWebhookBodySchema },
    responses: { 200: { description: 'the webhook', schema: webhookSchema } },
    errors: [404, 409],
    handle: ({ ctx, orgId, params, body: input }) => reply.ok(body(svc.patchWebhook(ctx, orgId, params.webhook_id, input))),
  }),
  defineRoute({
    operationId: 'deleteWebhook',
    method: 'delete',
    path: `${HOOKS}/{webhook_id}`,
    tag,
    summary: 'Delete a webhook',
    responses: { 204: { description: 'deleted', schema: null } },
    errors: [404],
    handle: ({ ctx, orgId, params }) => {
      svc.deleteWebhook(ctx, orgId, params.webhook_id);
      return reply.noContent();
    },
  }),
  defineRoute({
    operationId: 'pingWebhook',
    method: 'post',
    path: `${HOOKS}/{webhook_id}/ping`,
    tag,
    summary: 'Send one ping event to this webhook alone',
    responses: { 200: { description: 'the outcome of the delivery', schema: pingResultSchema } },
    errors: [404],
    handle: async ({ ctx, orgId, params }) => reply.ok(await svc.pingWebhook(ctx, orgId, params.webhook_id)),
  }),
];
