import type { Db } from './db.ts';
import { fromJson, nowIso, toJson } from './db.ts';
import { oneRow } from './rows.ts';
import type { ComponentHealthContext, HealthStatus, InstallHealthContext } from '../machines/health.ts';

export interface Install {
  install_id: string;
  org_id: string;
  app_id: string;
  name: string;
  labels: Record<string, string>;
  app_config_id: string | null;
  app_branch_id: string | null;
  sandbox_id: string;
  runner_id: string;
  inputs: Record<string, unknown>;
  provisioned: boolean;
  health_state: HealthStatus;
  health_ctx: InstallHealthContext;
  created_at: string;
}

export interface Component {
  component_id: string;
  install_id: string;
  org_id: string;
  name: string;
  labels: Record<string, string>;
  position: number;
  active: boolean;
  health_state: HealthStatus;
  health_ctx: ComponentHealthContext;
  /** the reason the producer gave with the last known verdict (null when none) */
  health_reason: string | null;
}

export interface Action {
  action_id: string;
  install_id: string;
  org_id: string;
  name: string;
  labels: Record<string, string>;
  inputs: Record<string, { required?: boolean }>;
  position: number;
  active: boolean;
}

// biome-ignore lint/suspicious/noExplicitAny: a SQLite row, decoded into its typed shape here
const decodeInstall = (r: any): Install => ({
  ...r,
  labels: fromJson(r.labels, {}),
  inputs: fromJson(r.inputs, {}),
  provisioned: !!r.provisioned,
  health_ctx: fromJson(r.health_ctx, { verdicts: {} }),
});
// biome-ignore lint/suspicious/noExplicitAny: a SQLite row, decoded into its typed shape here
const decodeComponent = (r: any): Component => ({
  ...r,
  labels: fromJson(r.labels, {}),
  active: !!r.active,
  health_ctx: fromJson(r.health_ctx, { verdict: null }),
});
// biome-ignore lint/suspicious/noExplicitAny: a SQLite row, decoded into its typed shape here
const decodeAction = (r: any): Action => ({ ...r, labels: fromJson(r.labels, {}), inputs: fromJson(r.inputs, {}), active: !!r.active });

export function insertInstall(db: Db, i: Omit<Install, 'created_at' | 'provisioned' | 'health_state' | 'health_ctx'>): void {
  db.prepare(
    `INSERT INTO installs (install_id, org_id, app_id, name, labels, app_config_id, app_branch_id, sandbox_id, runner_id, inputs,
     created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  ).run(
    i.install_id,
    i.org_id,
    i.app_id,
    i.name,
    toJson(i.labels),
    i.app_config_id,
    i.app_branch_id,
    i.sandbox_id,
    i.runner_id,
    toJson(i.inputs),
    nowIso(),
  );
}

export function getInstall(db: Db, orgId: string, id: string): Install | undefined {
  return oneRow(db, 'SELECT * FROM installs WHERE org_id = ? AND install_id = ?', decodeInstall, orgId, id);
}

export function getInstallById(db: Db, id: string): Install | undefined {
  return oneRow(db, 'SELECT * FROM installs WHERE install_id = ?', decodeInstall, id);
}

export function listInstalls(db: Db, orgId: string): Install[] {
  return db.prepare('SELECT * FROM installs WHERE org_id = ? ORDER BY rowid DESC').all(orgId).map(decodeInstall);
}

export function listAppInstalls(db: Db, appId: string): Install[] {
  return db.prepare('SELECT * FROM installs WHERE app_id = ? ORDER BY rowid').all(appId).map(decodeInstall);
}

export function listProvisionedInstalls(db: Db): Install[] {
  return db.prepare('SELECT * FROM installs WHERE provisioned = 1 ORDER BY rowid').all().map(decodeInstall);
}

export function setInstallConfig(db: Db, id: string, appConfigId: string): void {
  db.prepare('UPDATE installs SET app_config_id = ? WHERE install_id = ?').run(appConfigId, id);
}

export function setInstallInputs(db: Db, id: string, inputs: Record<string, unknown>): void {
  db.prepare('UPDATE installs SET inputs = ? WHERE install_id = ?').run(toJson(inputs), id);
}

export function setProvisioned(db: Db, id: string, provisioned: boolean): void {
  db.prepare('UPDATE installs SET provisioned = ? WHERE install_id = ?').run(provisioned ? 1 : 0, id);
}

export function setInstallHealth(db: Db, id: string, state: HealthStatus, ctx: InstallHealthContext): void {
  db.prepare('UPDATE installs SET health_state = ?, health_ctx = ? WHERE install_id = ?').run(state, toJson(ctx), id);
}

export function upsertComponent(db: Db, c: Omit<Component, 'health_state' | 'health_ctx' | 'health_reason'>): void {
  db.prepare(
    `INSERT INTO install_components (component_id, install_id, org_id, name, labels, position, active) VALUES (?, ?, ?, ?, ?, ?, ?)
     ON CONFLICT (component_id) DO UPDATE SET labels = excluded.labels, position = excluded.position, active = excluded.active`,
  ).run(c.component_id, c.install_id, c.org_id, c.name, toJson(c.labels), c.position, c.active ? 1 : 0);
}

export function deactivateComponentsExcept(db: Db, installId: string, keep: string[]): void {
  const all = db.prepare('SELECT component_id FROM install_components WHERE install_id = ?').all(installId) as { component_id: string }[];
  const stmt = db.prepare('UPDATE install_components SET active = 0 WHERE component_id = ?');
  for (const { component_id } of all) if (!keep.includes(component_id)) stmt.run(component_id);
}

export function listComponents(db: Db, installId: string, activeOnly = true): Component[] {
  const sql = `SELECT * FROM install_components WHERE install_id = ?${activeOnly ? ' AND active = 1' : ''} ORDER BY position`;
  return db.prepare(sql).all(installId).map(decodeComponent);
}

export function getComponent(db: Db, installId: string, componentId: string): Component | undefined {
  return oneRow(db, 'SELECT * FROM install_components WHERE install_id = ? AND component_id = ?', decodeComponent, installId, componentId);
}

export function getComponentById(db: Db, componentId: string): Component | undefined {
  return oneRow(db, 'SELECT * FROM install_components WHERE component_id = ?', decodeComponent, componentId);
}

export function setComponentHealth(
  db: Db,
  componentId: string,
  state: HealthStatus,
  ctx: ComponentHealthContext,
  reason: string | null,
): void {
  db.prepare('UPDATE install_components SET health_state = ?, health_ctx = ?, health_reason = ? WHERE component_id = ?').run(
    state,
    toJson(ctx),
    reason,
    componentId,
  );
}

export function upsertAction(db: Db, a: Action): void {
  db.prepare(
    `INSERT INTO install_actions (action_id, install_id, org_id, name, labels, inputs, position, active) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
     ON CONFLICT (action_id) DO UPDATE SET labels = excluded.labels, inputs = excluded.inputs, position = excluded.position,
     active = excluded.active`,
  ).run(a.action_id, a.install_id, a.org_id, a.name, toJson(a.labels), toJson(a.inputs), a.position, a.active ? 1 : 0);
}

export function deactivateActionsExcept(db: Db, installId: string, keep: string[]): void {
  const all = db.prepare('SELECT action_id FROM install_actions WHERE install_id = ?').all(installId) as { action_id: string }[];
  const stmt = db.prepare('UPDATE install_actions SET active = 0 WHERE action_id = ?');
  for (const { action_id } of all) if (!keep.includes(action_id)) stmt.run(action_id);
}

export function listActions(db: Db, installId: string): Action[] {
  return db.prepare('SELECT * FROM install_actions WHERE install_id = ? AND active = 1 ORDER BY position').all(installId).map(decodeAction);
}

export function getActionById(db: Db, actionId: string): Action | undefined {
  return oneRow(db, 'SELECT * FROM install_actions WHERE action_id = ?', decodeAction, actionId);
}

/**
 * Labels of an install, component or action of one org, for `match` (CONTRACT 6.3, 6.7): an id
 * that belongs to another org, or to nothing, has no labels (null).
 */
export function entityLabels(db: Db, orgId: string, kind: 'install' | 'component' | 'action', id: string): Record<string, string> | null {
  const table = kind === 'install' ? 'installs' : kind === 'component' ? 'install_components' : 'install_actions';
  const r = db.prepare(`SELECT labels FROM ${table} WHERE ${kind}_id = ? AND org_id = ?`).get(id, orgId) as { labels: string } | undefined;
  return r ? fromJson<Record<string, string>>(r.labels, {}) : null;
}
