import { Hono } from 'hono';
import type { AppContext } from '../../context.ts';
import type { AuthEnv } from '../auth.ts';
import { readJson } from '../validation.ts';
import { approvalSchema } from '../schemas.ts';
import * as workflows from '../../services/workflows.ts';

export function workflowRoutes(ctx: AppContext) {
  const r = new Hono<AuthEnv>();
  r.get('/:id', (c) => c.json(workflows.getWorkflowView(ctx, c.get('orgId'), c.req.param('id'))));
  r.post('/:id/steps/:step/approval', async (c) => {
    workflows.getWorkflowView(ctx, c.get('orgId'), c.req.param('id'));
    const body = await readJson(c, approvalSchema);
    return c.json(workflows.respondToApproval(ctx, c.get('orgId'), c.req.param('id'), c.req.param('step'), body.response, body.note));
  });
  r.post('/:id/cancel', (c) => c.json(workflows.cancelWorkflow(ctx, c.get('orgId'), c.req.param('id'))));
  return r;
}
