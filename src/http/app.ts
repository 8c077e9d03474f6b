import { Hono } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import type { AppContext } from '../context.ts';
import { requireOrg, type AuthEnv } from './auth.ts';
import { errorResponse, HttpError, toHttpError } from './errors.ts';
import { webhookRoutes } from './routes/webhooks.ts';
import { appRoutes } from './routes/apps.ts';
import { installRoutes } from './routes/installs.ts';
import { workflowRoutes } from './routes/workflows.ts';
import { openApiDocument } from './openapi.ts';
import { renderMetrics } from '../metrics.ts';

export const MAX_BODY_BYTES = 1024 * 1024;

export function createHttpApp(ctx: AppContext): Hono {
  const app = new Hono();

  app.onError((err, c) => {
    const e = toHttpError(err);
    if (e.status >= 500) ctx.logger.error({ err: err instanceof Error ? err.message : String(err), path: c.req.path }, 'request failed');
    // An oversized body is left unread and the server drops the connection: say so, or a
    // keep-alive client reuses the socket for its next request and that request fails.
    if (e.status === 413) c.header('connection', 'close');
    return errorResponse(c, e);
  });
  app.notFound((c) => errorResponse(c, new HttpError(404, 'not_found', `no route for ${c.req.method} ${c.req.path}`)));

  app.get('/metrics', async (c) => {
    const m = await renderMetrics(ctx.metrics);
    return c.body(m.body, 200, { 'content-type': m.contentType });
  });
  app.get('/healthz', (c) => c.json({ ok: true }));

  const v1 = new Hono<AuthEnv>();
  v1.use(
    '*',
    bodyLimit({
      maxSize: MAX_BODY_BYTES,
      onError: () => {
        throw new HttpError(413, 'payload_too_large', 'request body is over 1 MiB');
      },
    }),
  );
  v1.get('/openapi.json', (c) => c.json(openApiDocument()));
  v1.use('*', requireOrg(ctx.db));
  v1.route('/orgs/current/webhooks', webhookRoutes(ctx));
  v1.route('/apps', appRoutes(ctx));
  v1.route('/installs', installRoutes(ctx));
  v1.route('/workflows', workflowRoutes(ctx));
  app.route('/v1', v1);

  return app;
}
