import { Hono } from 'hono';
import type { AppContext } from '../../context.ts';
import type { AuthEnv } from '../auth.ts';
import { readJson } from '../validation.ts';
import { actionRunSchema, configUpdateSchema, createInstallSchema, driftScanSchema, inputsUpdateSchema } from '../schemas.ts';
import * as installs from '../../services/installs.ts';
import * as rollback from '../../services/rollback.ts';

export function installRoutes(ctx: AppContext) {
  const r = new Hono<AuthEnv>();
  const org = (c: { get(k: 'orgId'): string }) => c.get('orgId');
  r.get('/', (c) => c.json(installs.listInstalls(ctx, org(c))));
  r.post('/', async (c) => {
    const body = await readJson(c, createInstallSchema);
    return c.json(installs.createInstall(ctx, org(c), body), 201);
  });
  r.get('/:id', (c) => c.json(installs.getInstallView(ctx, org(c), c.req.param('id'))));
  r.get('/:id/workflows', (c) => c.json(installs.listInstallWorkflows(ctx, org(c), c.req.param('id'))));

  const simple = [
    ['/:id/reprovision', 'reprovision'],
    ['/:id/deprovision', 'deprovision'],
    ['/:id/sandbox/reprovision', 'reprovision_sandbox'],
    ['/:id/sandbox/deprovision', 'deprovision_sandbox'],
    ['/:id/secrets/sync', 'sync_secrets'],
  ] as const;
  for (const [path, type] of simple) {
    r.post(path, (c) => c.json(installs.startInstallWorkflow(ctx, org(c), c.req.param('id'), type), 201));
  }
  r.post('/:id/components/:component/deploy', (c) =>
    c.json(installs.startInstallWorkflow(ctx, org(c), c.req.param('id'), 'manual_deploy', { component_id: c.req.param('component') }), 201),
  );
  r.post('/:id/components/:component/teardown', (c) =>
    c.json(installs.startInstallWorkflow(ctx, org(c), c.req.param('id'), 'teardown_component', { component_id: c.req.param('component') }), 201),
  );
  r.post('/:id/actions/:action/runs', async (c) => {
    installs.mustGetInstall(ctx, org(c), c.req.param('id'));
    const body = await readJson(c, actionRunSchema, {});
    const wf = installs.startInstallWorkflow(ctx, org(c), c.req.param('id'), 'action_workflow_run', {
      action_id: c.req.param('action'),
      inputs: body.inputs ?? {},
    });
    return c.json(wf, 201);
  });
  r.post('/:id/drift-scans', async (c) => {
    installs.mustGetInstall(ctx, org(c), c.req.param('id'));
    const body = await readJson(c, driftScanSchema, {});
    const type = body.sandbox ? 'drift_run_reprovision_sandbox' : 'drift_run';
    return c.json(installs.startInstallWorkflow(ctx, org(c), c.req.param('id'), type), 201);
  });
  r.patch('/:id/inputs', async (c) => {
    installs.mustGetInstall(ctx, org(c), c.req.param('id'));
    const body = await readJson(c, inputsUpdateSchema);
    return c.json(installs.startInstallWorkflow(ctx, org(c), c.req.param('id'), 'input_update', { inputs: body.inputs }), 201);
  });

  r.get('/:id/app-config-versions', (c) => c.json(rollback.listInstallVersions(ctx, org(c), c.req.param('id'))));
  r.get('/:id/app-config-versions/:version/diff', (c) =>
    c.json(rollback.versionDiff(ctx, org(c), c.req.param('id'), c.req.param('version'))),
  );
  r.post('/:id/app-config-updates', async (c) => {
    installs.mustGetInstall(ctx, org(c), c.req.param('id'));
    const body = await readJson(c, configUpdateSchema);
    const res = rollback.updateInstallConfig(ctx, org(c), c.req.param('id'), body);
    return c.json(res.body, res.status);
  });
  return r;
}
