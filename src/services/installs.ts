// Installs and the workflows that act on them (CONTRACT 4.2).
import type { AppContext } from '../context.ts';
import { InvalidError, NotFoundError } from '../domain/errors.ts';
import { refuseVetoed } from '../engine/config-apply.ts';
import { getBranch, getConfig, latestConfig } from '../../store/apps.ts';
import { getInstall, listActions, listComponents, listInstalls as dbListInstalls, type Install } from '../../store/installs.ts';
import { listOwnerWorkflows } from '../../store/workflows.ts';
import type { InstallWorkflowType } from '../engine/definitions.ts';
import type { Verdict } from '../domain/status.ts';
import { labelsOverLimits } from '../domain/limits.ts';
import { mustGetApp } from './catalog.ts';
import { workflowSummary, workflowView } from './workflows.ts';
import type { InstallView } from '../schemas/installs.ts';

export type { InstallView };

export function installView(ctx: AppContext, i: Install): InstallView {
  const components = listComponents(ctx.db, i.install_id).map((c) => ({
    component_id: c.component_id,
    name: c.name,
    labels: c.labels,
    health: (c.health_ctx.verdict ?? 'unknown') as Verdict,
  }));
  const actions = listActions(ctx.db, i.install_id).map((a) => ({
    action_id: a.action_id,
    name: a.name,
    labels: a.labels,
    inputs: a.inputs,
  }));
  const verdicts = Object.values(i.health_ctx.verdicts ?? {});
  const rank = { healthy: 0, degraded: 1, unhealthy: 2 } as Record<string, number>;
  const health = (verdicts.length ? verdicts.reduce((w, v) => (rank[v] > rank[w] ? v : w), 'healthy') : 'unknown') as Verdict;
  return {
    install_id: i.install_id,
    name: i.name,
    app_id: i.app_id,
    labels: i.labels,
    app_config_id: i.app_config_id,
    app_branch_id: i.app_branch_id,
    components,
    actions,
    sandbox_id: i.sandbox_id,
    runner_id: i.runner_id,
    inputs: i.inputs,
    health,
    provisioned: i.provisioned,
    created_at: i.created_at,
  };
}

export function mustGetInstall(ctx: AppContext, orgId: string, installId: string): Install {
  const i = getInstall(ctx.db, orgId, installId);
  if (!i) throw new NotFoundError('install', installId);
  return i;
}

/** Install names by id, of the org's installs among `ids` (a page names a few installs without reading them all). */
export function installNames(ctx: AppContext, orgId: string, ids: readonly string[]): Map<string, string> {
  const names = new Map<string, string>();
  for (const id of ids) {
    const i = getInstall(ctx.db, orgId, id);
    if (i) names.set(id, i.name);
  }
  return names;
}

export function listInstalls(ctx: AppContext, orgId: string): InstallView[] {
  return dbListInstalls(ctx.db, orgId).map((i) => installView(ctx, i));
}

export function getInstallView(ctx: AppContext, orgId: string, installId: string): InstallView {
  return installView(ctx, mustGetInstall(ctx, orgId, installId));
}

/** The body of POST /v1/installs (validated by src/schemas/installs.ts createInstallSchema). */
export interface CreateInstallInput {
  app_id: string;
  name: string;
  app_config_id?: string;
  labels?: Record<string, string>;
  app_branch_id?: string;
}

/** Create an install, its runner and entities, record version 1 and start `provision` (CONTRACT 4.2). */
export function createInstall(ctx: AppContext, orgId: string, body: CreateInstallInput) {
  const app = mustGetApp(ctx, orgId, body.app_id);
  let config;
  if (body.app_config_id) {
    config = getConfig(ctx.db, orgId, body.app_config_id);
    if (!config) throw new NotFoundError('app config', body.app_config_id);
    if (config.app_id !== app.app_id) {
      throw new InvalidError(`app config ${config.app_config_id} belongs to another app`, [
        { path: 'app_config_id', message: 'config of another app' },
      ]);
    }
  } else {
    config = latestConfig(ctx.db, app.app_id);
    if (!config) throw new InvalidError(`app ${app.app_id} has no config yet`, [{ path: 'app_id', message: 'app has no config' }]);
  }
  refuseVetoed(config);
  const over = labelsOverLimits(config.body);
  if (over.length) {
    // a config stored before CONTRACT 8: a new install would write its labels anew (existing installs keep working)
    throw new InvalidError(
      `app config ${config.app_config_id} has labels over the limits (${over.join(', ')}); create a config within them`,
      [
        {
          path: body.app_config_id ? 'app_config_id' : 'app_id',
          message: `app config ${config.app_config_id}: ${over.join(', ')} over the label limits`,
        },
      ],
    );
  }
  if (body.app_branch_id && !getBranch(ctx.db, orgId, app.app_id, body.app_branch_id)) {
    throw new InvalidError(`app branch ${body.app_branch_id} is not a branch of app ${app.app_id}`, [
      { path: 'app_branch_id', message: 'unknown branch of this app' },
    ]);
  }
  const install = ctx.engine.createInstall(
    { org_id: orgId, app_id: app.app_id, name: body.name, labels: body.labels ?? {}, app_branch_id: body.app_branch_id ?? null },
    config,
  );
  return installView(ctx, install);
}

/** Start one of the install workflows of CONTRACT 4.2 and return it. */
export function startInstallWorkflow(
  ctx: AppContext,
  orgId: string,
  installId: string,
  type: InstallWorkflowType,
  opts: { component_id?: string; action_id?: string; inputs?: Record<string, unknown> } = {},
) {
  const install = mustGetInstall(ctx, orgId, installId);
  const components = listComponents(ctx.db, installId);
  const component = opts.component_id ? components.find((c) => c.component_id === opts.component_id) : undefined;
  if (opts.component_id && !component) throw new NotFoundError('component', opts.component_id);
  const action = opts.action_id ? listActions(ctx.db, installId).find((a) => a.action_id === opts.action_id) : undefined;
  if (opts.action_id && !action) throw new NotFoundError('action', opts.action_id);
  const wf = ctx.engine.startInstallWorkflow(install, type, { component, action, inputs: opts.inputs });
  return workflowView(ctx, wf.workflow_id);
}

export function listInstallWorkflows(ctx: AppContext, orgId: string, installId: string) {
  mustGetInstall(ctx, orgId, installId);
  return listOwnerWorkflows(ctx.db, orgId, installId).map(workflowSummary);
}
