import type { Db } from './db.ts';
import { fromJson, insertRow, nowIso, toJson } from './db.ts';
import type { AppConfigBody } from '../src/domain/app-config.ts';

export interface App {
  app_id: string;
  org_id: string;
  name: string;
  created_at: string;
}

export interface AppConfig {
  app_config_id: string;
  app_id: string;
  org_id: string;
  version: number;
  body: AppConfigBody;
  created_at: string;
  /** set while the config is vetoed: applying it is refused (CONTRACT 4.3) */
  vetoed: Veto | null;
}

export interface Veto {
  reason: string;
  at: string;
}

export interface InstallGroup {
  name: string;
  install_ids?: string[];
  selector?: { match_labels: Record<string, string> };
}

export interface AppBranch {
  app_branch_id: string;
  app_id: string;
  org_id: string;
  name: string;
  install_groups: InstallGroup[];
  created_at: string;
}

export function insertApp(db: Db, a: Omit<App, 'created_at'>): App {
  const row = { ...a, created_at: nowIso() };
  insertRow(db, 'apps', { app_id: row.app_id, org_id: row.org_id, name: row.name, created_at: row.created_at });
  return row;
}

export function getApp(db: Db, orgId: string, appId: string): App | undefined {
  return db.prepare('SELECT app_id, org_id, name, created_at FROM apps WHERE org_id = ? AND app_id = ?').get(orgId, appId) as
    | App
    | undefined;
}

/** The org's apps, newest first; with a page, at most `limit` of those created before the app `after`. */
export function listApps(db: Db, orgId: string, page?: { after?: string; limit: number }): App[] {
  if (!page)
    return db.prepare('SELECT app_id, org_id, name, created_at FROM apps WHERE org_id = ? ORDER BY rowid DESC').all(orgId) as App[];
  return db
    .prepare(
      `SELECT app_id, org_id, name, created_at FROM apps WHERE org_id = ?
         AND (? IS NULL OR rowid < (SELECT rowid FROM apps WHERE org_id = ? AND app_id = ?))
       ORDER BY rowid DESC LIMIT ?`,
    )
    .all(orgId, page.after ?? null, orgId, page.after ?? null, page.limit) as App[];
}

type RawConfig = Omit<AppConfig, 'body' | 'vetoed'> & { body: string; vetoed_reason: string | null; vetoed_at: string | null };
const decodeConfig = ({ vetoed_reason, vetoed_at, ...r }: RawConfig): AppConfig => ({
  ...r,
  body: fromJson(r.body, { components: [] }),
  vetoed: vetoed_reason !== null && vetoed_at !== null ? { reason: vetoed_reason, at: vetoed_at } : null,
});

/** Configs are immutable and numbered 1, 2, 3 per app. */
export function insertConfig(db: Db, c: Omit<AppConfig, 'created_at' | 'version' | 'vetoed'>): AppConfig {
  const { v } = db.prepare('SELECT COALESCE(MAX(version), 0) + 1 AS v FROM app_configs WHERE app_id = ?').get(c.app_id) as { v: number };
  const row: AppConfig = { ...c, version: v, created_at: nowIso(), vetoed: null };
  insertRow(db, 'app_configs', {
    app_config_id: row.app_config_id,
    app_id: row.app_id,
    org_id: row.org_id,
    version: row.version,
    body: JSON.stringify(row.body),
    created_at: row.created_at,
  });
  return row;
}

export function getConfig(db: Db, orgId: string, id: string): AppConfig | undefined {
  const r = db.prepare('SELECT * FROM app_configs WHERE org_id = ? AND app_config_id = ?').get(orgId, id) as RawConfig | undefined;
  return r && decodeConfig(r);
}

/** Veto a config (reason and time) or lift its veto (null). */
export function setConfigVeto(db: Db, appConfigId: string, veto: Veto | null): void {
  db.prepare('UPDATE app_configs SET vetoed_reason = ?, vetoed_at = ? WHERE app_config_id = ?').run(
    veto?.reason ?? null,
    veto?.at ?? null,
    appConfigId,
  );
}

export function latestConfig(db: Db, appId: string): AppConfig | undefined {
  const r = db.prepare('SELECT * FROM app_configs WHERE app_id = ? ORDER BY version DESC LIMIT 1').get(appId) as RawConfig | undefined;
  return r && decodeConfig(r);
}

export function listConfigs(db: Db, appId: string): AppConfig[] {
  return (db.prepare('SELECT * FROM app_configs WHERE app_id = ? ORDER BY version DESC').all(appId) as RawConfig[]).map(decodeConfig);
}

type RawBranch = Omit<AppBranch, 'install_groups'> & { install_groups: string };
const decodeBranch = (r: RawBranch): AppBranch => ({ ...r, install_groups: fromJson(r.install_groups, []) });

export function insertBranch(db: Db, b: Omit<AppBranch, 'created_at'>): AppBranch {
  const row = { ...b, created_at: nowIso() };
  insertRow(db, 'app_branches', {
    app_branch_id: row.app_branch_id,
    app_id: row.app_id,
    org_id: row.org_id,
    name: row.name,
    install_groups: toJson(row.install_groups),
    created_at: row.created_at,
  });
  return row;
}

export function getBranch(db: Db, orgId: string, appId: string, id: string): AppBranch | undefined {
  const r = db.prepare('SELECT * FROM app_branches WHERE org_id = ? AND app_id = ? AND app_branch_id = ?').get(orgId, appId, id) as
    | RawBranch
    | undefined;
  return r && decodeBranch(r);
}

export function listBranches(db: Db, appId: string): AppBranch[] {
  return (db.prepare('SELECT * FROM app_branches WHERE app_id = ? ORDER BY rowid DESC').all(appId) as RawBranch[]).map(decodeBranch);
}

/** A branch of any app of the org, by its id alone (names for workflows owned by a branch). */
export function findBranch(db: Db, orgId: string, id: string): AppBranch | undefined {
  const r = db.prepare('SELECT * FROM app_branches WHERE org_id = ? AND app_branch_id = ?').get(orgId, id) as RawBranch | undefined;
  return r && decodeBranch(r);
}
