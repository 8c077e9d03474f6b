// Applying an app config to an install: entities, the version row and the workflow that deploys it.
import type { Db } from '../../store/db.ts';
import type { AppConfig } from '../../store/apps.ts';
import { getConfig } from '../../store/apps.ts';
import {
  deactivateActionsExcept,
  deactivateComponentsExcept,
  listComponents,
  setInstallConfig,
  upsertAction,
  upsertComponent,
  type Component,
  type Install,
} from '../../store/installs.ts';
import { insertVersion, type VersionRow, type WorkflowRow } from '../../store/workflows.ts';
import type { Tx } from './engine.ts';
import type { ParentRef } from '../domain/facts.ts';
import { newId, stableId } from '../domain/ids.ts';
import { installSteps } from './definitions.ts';
import { diffConfigs, type ConfigDiff } from './config-diff.ts';
import type { Orchestrator } from './workflows.ts';

export const componentId = (installId: string, name: string) => stableId('cmp', installId, name);
export const actionId = (installId: string, name: string) => stableId('act', installId, name);

/** Make the install's components and actions those of the config (ids stable per install and name). */
export function syncInstallEntities(db: Db, install: Install, config: AppConfig): void {
  const comps = config.body.components.map((c, position) => ({
    component_id: componentId(install.install_id, c.name),
    install_id: install.install_id,
    org_id: install.org_id,
    name: c.name,
    labels: c.labels ?? {},
    position,
    active: true,
  }));
  for (const c of comps) upsertComponent(db, c);
  deactivateComponentsExcept(db, install.install_id, comps.map((c) => c.component_id));
  const actions = (config.body.actions ?? []).map((a, position) => ({
    action_id: actionId(install.install_id, a.name),
    install_id: install.install_id,
    org_id: install.org_id,
    name: a.name,
    labels: a.labels ?? {},
    inputs: a.inputs ?? {},
    position,
    active: true,
  }));
  for (const a of actions) upsertAction(db, a);
  deactivateActionsExcept(db, install.install_id, actions.map((a) => a.action_id));
  setInstallConfig(db, install.install_id, config.app_config_id);
}

/** The plan of moving an install to a config: the diff from its current config. */
export function planFor(db: Db, install: Install, target: AppConfig): ConfigDiff {
  const current = install.app_config_id ? getConfig(db, install.org_id, install.app_config_id) : undefined;
  return diffConfigs(current?.body ?? null, target.body);
}

/**
 * Start an `app_config_update` workflow (CONTRACT 4.3): reprovision the sandbox if it changed,
 * tear down removed components, deploy added or changed ones; record a new version.
 */
export function applyConfigUpdate(
  orch: Orchestrator,
  _t: Tx,
  install: Install,
  target: AppConfig,
  parent?: ParentRef,
): { workflow: WorkflowRow; version: VersionRow; plan: ConfigDiff } {
  const db = orch.engine.db;
  const plan = planFor(db, install, target);
  const before = listComponents(db, install.install_id);
  const removedNames = new Set(plan.components.removed.map((c) => c.name));
  const removed = before.filter((c) => removedNames.has(c.name));
  syncInstallEntities(db, install, target);
  const after = listComponents(db, install.install_id);
  const deployNames = new Set([...plan.components.added, ...plan.components.changed].map((c) => c.name));
  const deploy: Component[] = after.filter((c) => deployNames.has(c.name));
  const oldConfigId = install.app_config_id;
  const workflow = orch.startWorkflow({
    org_id: install.org_id,
    type: 'app_config_update',
    owner_id: install.install_id,
    owner_type: 'installs',
    parent: parent ?? null,
    params: { app_config_id: target.app_config_id },
    steps: installSteps('app_config_update', {
      install,
      components: after,
      update: { sandboxChanged: plan.sandbox_changed, removed, deploy },
    }),
  });
  const version = insertVersion(db, {
    version_id: newId('ver'),
    install_id: install.install_id,
    org_id: install.org_id,
    app_config_id: target.app_config_id,
    old_app_config_id: oldConfigId,
    workflow_id: workflow.workflow_id,
    status: workflow.status,
  });
  return { workflow, version, plan };
}
