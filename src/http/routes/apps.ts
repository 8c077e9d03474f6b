import { Hono } from 'hono';
import type { AppContext } from '../../context.ts';
import type { AuthEnv } from '../auth.ts';
import { readJson } from '../validation.ts';
import { appConfigSchema, branchRunSchema, createAppSchema, createBranchSchema } from '../schemas.ts';
import * as catalog from '../../services/catalog.ts';
import { startBranchRun } from '../../services/rollback.ts';

export function appRoutes(ctx: AppContext) {
  const r = new Hono<AuthEnv>();
  r.post('/', async (c) => {
    const body = await readJson(c, createAppSchema);
    return c.json(catalog.createApp(ctx, c.get('orgId'), body.name), 201);
  });
  r.get('/:app', (c) => c.json(catalog.mustGetApp(ctx, c.get('orgId'), c.req.param('app'))));
  r.post('/:app/configs', async (c) => {
    catalog.mustGetApp(ctx, c.get('orgId'), c.req.param('app'));
    const body = await readJson(c, appConfigSchema);
    return c.json(catalog.createConfig(ctx, c.get('orgId'), c.req.param('app'), body), 201);
  });
  r.get('/:app/configs', (c) => c.json(catalog.listConfigs(ctx, c.get('orgId'), c.req.param('app'))));
  r.post('/:app/branches', async (c) => {
    catalog.mustGetApp(ctx, c.get('orgId'), c.req.param('app'));
    const body = await readJson(c, createBranchSchema);
    return c.json(catalog.createBranch(ctx, c.get('orgId'), c.req.param('app'), body), 201);
  });
  r.post('/:app/branches/:branch/runs', async (c) => {
    const body = await readJson(c, branchRunSchema);
    return c.json(startBranchRun(ctx, c.get('orgId'), c.req.param('app'), c.req.param('branch'), body), 201);
  });
  return r;
}
