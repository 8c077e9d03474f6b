// Names for the ids people read (the dashboard's titles, tables and links): an org's, an app's,
// a branch's, a component's (removed ones too: an old step may name one) and a config's version.
import type { AppContext } from '../context.ts';
import { findBranch, getApp, getConfig, listApps } from '../../store/apps.ts';
import { listComponents } from '../../store/installs.ts';
import { getOrg } from '../../store/orgs.ts';

export const orgName = (ctx: AppContext, orgId: string): string | null => getOrg(ctx.db, orgId)?.name ?? null;

export const appName = (ctx: AppContext, orgId: string, appId: string): string | null => getApp(ctx.db, orgId, appId)?.name ?? null;

/** Every app of the org by id. */
export const appNames = (ctx: AppContext, orgId: string): Map<string, string> =>
  new Map(listApps(ctx.db, orgId).map((a) => [a.app_id, a.name]));

export const branchName = (ctx: AppContext, orgId: string, branchId: string): string | null =>
  findBranch(ctx.db, orgId, branchId)?.name ?? null;

/** The version of an app config of the org; null when it is not one. */
export const configVersion = (ctx: AppContext, orgId: string, appConfigId: string): number | null =>
  getConfig(ctx.db, orgId, appConfigId)?.version ?? null;

/** An install's components by id, removed ones too. */
export const componentNames = (ctx: AppContext, installId: string): Map<string, string> =>
  new Map(listComponents(ctx.db, installId, false).map((c) => [c.component_id, c.name]));
