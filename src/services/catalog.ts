// Apps, their immutable configs and their branches (CONTRACT 4.2).
import type { AppContext } from '../context.ts';
import { InvalidError, NotFoundError } from '../domain/errors.ts';
import { newId } from '../domain/ids.ts';
import {
  getApp,
  getConfig,
  insertApp,
  insertBranch,
  insertConfig,
  listApps as dbListApps,
  listConfigs as dbListConfigs,
  setConfigVeto,
  type AppConfig,
  type InstallGroup,
} from '../../store/apps.ts';
import { getInstall } from '../../store/installs.ts';
import type { AppConfigBody } from '../domain/app-config.ts';

/** An app as the API and the dashboard show it. */
const appView = (a: { app_id: string; name: string; created_at: string }) => ({ app_id: a.app_id, name: a.name, created_at: a.created_at });

export function createApp(ctx: AppContext, orgId: string, name: string) {
  return appView(insertApp(ctx.db, { app_id: newId('app'), org_id: orgId, name }));
}

/** The org's apps, newest first (as POST /v1/apps returns one). */
export function listApps(ctx: AppContext, orgId: string) {
  return dbListApps(ctx.db, orgId).map(appView);
}

/** A page of the org's apps, newest first: at most `limit` (default 100), those created before `after`. */
export function listAppsPage(ctx: AppContext, orgId: string, page: { after?: string; limit?: number }) {
  if (page.after !== undefined && !getApp(ctx.db, orgId, page.after)) {
    throw new InvalidError(`after: no app ${page.after}`, [{ path: 'after', message: `no app ${page.after}` }]);
  }
  return dbListApps(ctx.db, orgId, { after: page.after, limit: page.limit ?? 100 }).map(appView);
}

export function mustGetApp(ctx: AppContext, orgId: string, appId: string) {
  const app = getApp(ctx.db, orgId, appId);
  if (!app) throw new NotFoundError('app', appId);
  return app;
}

export function configView(c: AppConfig) {
  return { app_config_id: c.app_config_id, app_id: c.app_id, version: c.version, ...c.body, created_at: c.created_at, vetoed: c.vetoed };
}

/** A config of this app (another app's, or none: 404). */
export function mustGetAppConfig(ctx: AppContext, orgId: string, appId: string, appConfigId: string): AppConfig {
  mustGetApp(ctx, orgId, appId);
  const cfg = getConfig(ctx.db, orgId, appConfigId);
  if (!cfg || cfg.app_id !== appId) throw new NotFoundError('app config', appConfigId);
  return cfg;
}

/** Veto a config (CONTRACT 4.3): from now on applying it is 409 `vetoed`. Vetoing again replaces the reason. */
export function vetoConfig(ctx: AppContext, orgId: string, appId: string, appConfigId: string, reason: string) {
  const cfg = mustGetAppConfig(ctx, orgId, appId, appConfigId);
  setConfigVeto(ctx.db, cfg.app_config_id, { reason, at: new Date(ctx.clock.now()).toISOString() });
  return configView(getConfig(ctx.db, orgId, appConfigId)!);
}

/** Lift a config's veto (none: nothing changes). */
export function unvetoConfig(ctx: AppContext, orgId: string, appId: string, appConfigId: string) {
  const cfg = mustGetAppConfig(ctx, orgId, appId, appConfigId);
  setConfigVeto(ctx.db, cfg.app_config_id, null);
  return configView(getConfig(ctx.db, orgId, appConfigId)!);
}

export function createConfig(ctx: AppContext, orgId: string, appId: string, body: AppConfigBody) {
  mustGetApp(ctx, orgId, appId);
  const c = ctx.db.transaction(() => insertConfig(ctx.db, { app_config_id: newId('cfg'), app_id: appId, org_id: orgId, body })).immediate();
  return configView(c);
}

export function listConfigs(ctx: AppContext, orgId: string, appId: string) {
  mustGetApp(ctx, orgId, appId);
  return dbListConfigs(ctx.db, appId).map(configView);
}

export function createBranch(ctx: AppContext, orgId: string, appId: string, body: { name: string; install_groups: InstallGroup[] }) {
  mustGetApp(ctx, orgId, appId);
  body.install_groups.forEach((g, gi) =>
    (g.install_ids ?? []).forEach((id, ii) => {
      const install = getInstall(ctx.db, orgId, id);
      if (!install || install.app_id !== appId) {
        throw new InvalidError(`install ${id} is not an install of app ${appId}`, [
          { path: `install_groups.${gi}.install_ids.${ii}`, message: 'not an install of this app' },
        ]);
      }
    }),
  );
  const b = insertBranch(ctx.db, {
    app_branch_id: newId('abr'),
    app_id: appId,
    org_id: orgId,
    name: body.name,
    install_groups: body.install_groups,
  });
  return b;
}
