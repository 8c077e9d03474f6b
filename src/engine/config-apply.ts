// App configs applied to installs (CONTRACT 4.2, 4.3): creating an install on a config, moving an
// install to another config (its entities, a new version, the workflow that deploys the change),
// and the children of a branch run's deploy step.
import type { Db } from '../../store/db.ts';
import { getConfig, type AppConfig } from '../../store/apps.ts';
import {
  deactivateActionsExcept,
  deactivateComponentsExcept,
  getInstall,
  getInstallById,
  insertInstall,
  listComponents,
  setInstallConfig,
  upsertAction,
  upsertComponent,
  type Component,
  type Install,
} from '../../store/installs.ts';
import { insertRunner, orgRunner } from '../../store/runners.ts';
import { insertVersion, updateStep, type StepRow, type VersionRow, type WorkflowRow } from '../../store/workflows.ts';
import { VetoedError } from '../domain/errors.ts';
import type { ParentRef } from '../domain/facts.ts';
import { newId, stableId } from '../domain/ids.ts';
import { installSteps } from './definitions.ts';
import { diffConfigs, type ConfigDiff } from '../domain/config-diff.ts';
import type { Tx } from './transaction.ts';
import { runTargetOf } from './rollout-plans.ts';
import type { WorkflowRuns as Workflows } from './workflow-runs.ts';

export const componentId = (installId: string, name: string) => stableId('cmp', installId, name);
export const actionId = (installId: string, name: string) => stableId('act', installId, name);

/** What an install's component and action share: the install, the name, labels, place in the config; active. */
const entityOf = (install: Install, e: { name: string; labels?: Record<string, string> }, position: number) => ({
  install_id: install.install_id,
  org_id: install.org_id,
  name: e.name,
  labels: e.labels ?? {},
  position,
  active: true,
});

/** Make the install's components and actions those of the config (ids stable per install and name). */
export function syncInstallEntities(db: Db, install: Install, config: AppConfig): void {
  const comps = config.body.components.map((c, position) => ({
    component_id: componentId(install.install_id, c.name),
    ...entityOf(install, c, position),
  }));
  for (const c of comps) upsertComponent(db, c);
  deactivateComponentsExcept(
    db,
    install.install_id,
    comps.map((c) => c.component_id),
  );
  const actions = (config.body.actions ?? []).map((a, position) => ({
    action_id: actionId(install.install_id, a.name),
    ...entityOf(install, a, position),
    inputs: a.inputs ?? {},
  }));
  for (const a of actions) upsertAction(db, a);
  deactivateActionsExcept(
    db,
    install.install_id,
    actions.map((a) => a.action_id),
  );
  setInstallConfig(db, install.install_id, config.app_config_id);
}

/** The plan of moving an install to a config: the diff from its current config. */
export function planFor(db: Db, install: Install, target: AppConfig): ConfigDiff {
  const current = install.app_config_id ? getConfig(db, install.org_id, install.app_config_id) : undefined;
  return diffConfigs(current?.body ?? null, target.body);
}

export interface NewInstall {
  org_id: string;
  app_id: string;
  name: string;
  labels: Record<string, string>;
  app_branch_id: string | null;
}

/** Create an install, its runner (and the org's, with the first install) and entities, record version 1 and start `provision`. */
export function provisionNewInstall(t: Tx, db: Db, workflows: Workflows, input: NewInstall, config: AppConfig): Install {
  if (!orgRunner(db, input.org_id)) {
    insertRunner(db, {
      runner_id: newId('run'),
      org_id: input.org_id,
      install_id: null,
      name: `org-runner-${input.org_id}`,
      group_id: stableId('rgrp', input.org_id),
      group_type: 'org',
    });
  }
  const installId = newId('inst');
  const runnerId = newId('run');
  insertInstall(db, {
    install_id: installId,
    org_id: input.org_id,
    app_id: input.app_id,
    name: input.name,
    labels: input.labels,
    app_config_id: null,
    app_branch_id: input.app_branch_id,
    sandbox_id: stableId('sbx', installId),
    runner_id: runnerId,
    inputs: config.body.inputs ?? {},
  });
  insertRunner(db, {
    runner_id: runnerId,
    org_id: input.org_id,
    install_id: installId,
    name: `install-${input.name}`,
    group_id: stableId('rgrp', installId),
    group_type: 'install',
  });
  const install = getInstall(db, input.org_id, installId)!;
  syncInstallEntities(db, install, config);
  const wf = workflows.start(t, {
    org_id: input.org_id,
    type: 'provision',
    owner_id: installId,
    owner_type: 'installs',
    params: { app_config_id: config.app_config_id },
    steps: installSteps('provision', { install, components: listComponents(db, installId) }),
  });
  insertVersion(db, {
    version_id: newId('ver'),
    install_id: installId,
    org_id: input.org_id,
    app_config_id: config.app_config_id,
    old_app_config_id: null,
    workflow_id: wf.workflow_id,
    status: wf.status,
  });
  return getInstall(db, input.org_id, installId)!;
}

/**
 * Start an `app_config_update` workflow (CONTRACT 4.3): reprovision the sandbox if it changed,
 * tear down removed components, deploy added or changed ones; record a new version.
 */
export function applyConfig(
  t: Tx,
  db: Db,
  workflows: Workflows,
  install: Install,
  target: AppConfig,
  parent?: ParentRef,
): { workflow: WorkflowRow; version: VersionRow; plan: ConfigDiff } {
  const plan = planFor(db, install, target);
  const before = listComponents(db, install.install_id);
  const removedNames = new Set(plan.components.removed.map((c) => c.name));
  const removed = before.filter((c) => removedNames.has(c.name));
  syncInstallEntities(db, install, target);
  const after = listComponents(db, install.install_id);
  const deployNames = new Set([...plan.components.added, ...plan.components.changed].map((c) => c.name));
  const deploy: Component[] = after.filter((c) => deployNames.has(c.name));
  const workflow = workflows.start(t, {
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
    old_app_config_id: install.app_config_id,
    workflow_id: workflow.workflow_id,
    status: workflow.status,
  });
  return { workflow, version, plan };
}

/** Why applying a vetoed config is refused (CONTRACT 3 `vetoed`: the message carries the veto's reason). */
export function vetoMessage(cfg: Pick<AppConfig, 'app_config_id' | 'version' | 'vetoed'>): string {
  return `app config ${cfg.app_config_id} (version ${cfg.version}) is vetoed: ${cfg.vetoed?.reason ?? ''}`;
}

/** Applying a vetoed config is refused everywhere it could be applied (409 `vetoed`). */
export function refuseVetoed(cfg: Pick<AppConfig, 'app_config_id' | 'version' | 'vetoed'>): void {
  if (cfg.vetoed) throw new VetoedError(vetoMessage(cfg));
}

/**
 * The children of a run's `deploy install group` step (one app_config_update per install of the
 * group, to the run's config for it) or of a `rollback install group` step (each install back to the
 * config it had before the run). A deploy records those configs in its step (`before`); it refuses
 * to apply a config vetoed since the run started.
 */
export function deployGroup(t: Tx, db: Db, workflows: Workflows, wf: WorkflowRow, step: StepRow, only?: string[]): string | void {
  const rollback = !!step.params.rollback;
  const own = step.params.targets as Record<string, string> | undefined;
  const moves: Array<{ install: Install; target: AppConfig }> = [];
  for (const id of (step.params.install_ids as string[]) ?? []) {
    const install = getInstallById(db, id);
    const target = getConfig(db, wf.org_id, own?.[id] ?? runTargetOf(wf, id));
    if (!install || !target) continue;
    if (target.vetoed && !rollback) return vetoMessage(target);
    moves.push({ install, target });
  }
  // the group's configs before the run, recorded once (a batch starts its installs over several calls)
  if (!rollback && step.params.before === undefined) {
    const before = Object.fromEntries(
      moves.filter((m) => m.install.app_config_id).map((m) => [m.install.install_id, m.install.app_config_id!]),
    );
    updateStep(db, { workflow_id: wf.workflow_id, step_id: step.step_id, params: { ...step.params, before } });
  }
  const parent: ParentRef = { workflow_id: wf.workflow_id, step_id: step.step_id, kind: 'workflow_step' };
  for (const m of moves) if (!only || only.includes(m.install.install_id)) applyConfig(t, db, workflows, m.install, m.target, parent);
}
