// Config rollback (spec 4, CONTRACT 4.3): version history, diffs, app config updates and branch runs.
import type { AppContext } from '../context.ts';
import { InvalidError, NotFoundError } from '../domain/errors.ts';
import { getBranch, getConfig, type AppConfig } from '../../store/apps.ts';
import { listAppInstalls } from '../../store/installs.ts';
import { getVersion, listVersions, previousVersion, type VersionRow } from '../../store/workflows.ts';
import { planFor } from '../engine/config-apply.ts';
import { diffConfigs } from '../engine/config-diff.ts';
import { matchAdmits } from '../dispatch/match.ts';
import { mustGetApp } from './catalog.ts';
import { mustGetInstall } from './installs.ts';

function versionView(ctx: AppContext, v: VersionRow) {
  const cfg = getConfig(ctx.db, v.org_id, v.app_config_id);
  return {
    version_id: v.version_id,
    install_id: v.install_id,
    version: v.version,
    app_config_id: v.app_config_id,
    app_config: cfg ? { app_config_id: cfg.app_config_id, version: cfg.version, ...cfg.body } : null,
    old_app_config_id: v.old_app_config_id,
    workflow_id: v.workflow_id,
    status: v.status,
    created_at: v.created_at,
  };
}

export function listInstallVersions(ctx: AppContext, orgId: string, installId: string) {
  mustGetInstall(ctx, orgId, installId);
  return listVersions(ctx.db, installId).map((v) => versionView(ctx, v));
}

export function versionDiff(ctx: AppContext, orgId: string, installId: string, versionId: string) {
  mustGetInstall(ctx, orgId, installId);
  const v = getVersion(ctx.db, installId, versionId);
  if (!v) throw new NotFoundError('app config version', versionId);
  const fromId = v.old_app_config_id ?? previousVersion(ctx.db, installId, v.version)?.app_config_id ?? null;
  const from = fromId ? getConfig(ctx.db, orgId, fromId) : undefined;
  const to = getConfig(ctx.db, orgId, v.app_config_id);
  return {
    version_id: v.version_id,
    from_app_config_id: fromId,
    to_app_config_id: v.app_config_id,
    ...diffConfigs(from?.body ?? null, to?.body ?? { components: [] }),
  };
}

function configOfApp(ctx: AppContext, orgId: string, appId: string, appConfigId: string): AppConfig {
  const cfg = getConfig(ctx.db, orgId, appConfigId);
  if (!cfg) throw new NotFoundError('app config', appConfigId);
  if (cfg.app_id !== appId) {
    throw new InvalidError(`app config ${appConfigId} belongs to another app`, [{ path: 'app_config_id', message: 'config of another app' }]);
  }
  return cfg;
}

/** POST app-config-updates: the plan only, or an `app_config_update` workflow and a new version. */
export function updateInstallConfig(ctx: AppContext, orgId: string, installId: string, body: { app_config_id: string; plan_only?: boolean }) {
  const install = mustGetInstall(ctx, orgId, installId);
  const target = configOfApp(ctx, orgId, install.app_id, body.app_config_id);
  const fromId = install.app_config_id;
  const withIds = (plan: ReturnType<typeof planFor>) => ({ from_app_config_id: fromId, to_app_config_id: target.app_config_id, ...plan });
  if (body.plan_only) return { status: 200 as const, body: { plan: withIds(planFor(ctx.db, install, target)), applied: false as const } };
  const r = ctx.engine.applyConfig(install, target);
  return {
    status: 201 as const,
    body: { plan: withIds(r.plan), applied: true as const, workflow_id: r.workflow.workflow_id, version_id: r.version.version_id },
  };
}

/** POST branch runs: an `app_branch_run` workflow over the branch's install groups (CONTRACT 4.3). */
export function startBranchRun(ctx: AppContext, orgId: string, appId: string, branchId: string, body: { app_config_id: string; skip_builds?: boolean }) {
  mustGetApp(ctx, orgId, appId);
  const branch = getBranch(ctx.db, orgId, appId, branchId);
  if (!branch) throw new NotFoundError('app branch', branchId);
  const target = configOfApp(ctx, orgId, appId, body.app_config_id);
  const installs = listAppInstalls(ctx.db, appId);
  const groups = branch.install_groups.map((g) => ({
    name: g.name,
    install_ids: installs
      .filter((i) => (g.install_ids ?? []).includes(i.install_id) || (g.selector ? matchAdmits({ installs: { selector: g.selector } }, { install: { id: i.install_id, labels: i.labels } }) : false))
      .map((i) => i.install_id),
  }));
  const wf = ctx.engine.startBranchRun(orgId, appId, branchId, target, groups, !!body.skip_builds);
  // a branch run is its workflow: run_id names the same thing (there is nothing else to look up)
  return { run_id: wf.workflow_id, workflow_id: wf.workflow_id, app_branch_id: branchId, app_config_id: target.app_config_id, status: wf.status };
}
