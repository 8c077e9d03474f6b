import { Hono } from 'hono';
import type { AppContext } from '../../context.ts';
import type { AuthEnv } from '../auth.ts';
import { readJson } from '../validation.ts';
import { createWebhookBodySchema, patchWebhookBodySchema } from '../../webhooks/subscription.ts';
import * as svc from '../../services/webhooks.ts';

export function webhookRoutes(ctx: AppContext) {
  const r = new Hono<AuthEnv>();
  r.get('/', (c) => c.json(svc.listWebhooks(ctx, c.get('orgId'))));
  r.post('/', async (c) => {
    const body = await readJson(c, createWebhookBodySchema);
    return c.json(svc.createWebhook(ctx, c.get('orgId'), body), 201);
  });
  r.get('/:id', (c) => c.json(svc.getWebhook(ctx, c.get('orgId'), c.req.param('id'))));
  r.patch('/:id', async (c) => {
    const orgId = c.get('orgId');
    svc.getWebhook(ctx, orgId, c.req.param('id')); // 404 before validating the body
    const body = await readJson(c, patchWebhookBodySchema);
    return c.json(svc.patchWebhook(ctx, orgId, c.req.param('id'), body));
  });
  r.delete('/:id', (c) => {
    svc.deleteWebhook(ctx, c.get('orgId'), c.req.param('id'));
    return c.body(null, 204);
  });
  r.post('/:id/ping', async (c) => c.json(await svc.pingWebhook(ctx, c.get('orgId'), c.req.param('id'))));
  return r;
}
