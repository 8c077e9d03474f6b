// Change windows (CONTRACT 4.3 "Change windows"): an app's allow and deny windows. A change here
// runs in the request's engine transaction (with its audit row), and the app's installs waiting
// for a window are evaluated afresh in it (src/engine/steps/window.ts).
import type { AppContext } from '../context.ts';
import {
  deleteChangeWindow,
  getChangeWindow,
  insertChangeWindow,
  listChangeWindows,
  type ChangeWindow,
} from '../../store/change-windows.ts';
import { getInstallById } from '../../store/installs.ts';
import { durationMs } from '../domain/duration.ts';
import { InvalidError, LimitExceededError, NotFoundError } from '../domain/errors.ts';
import { LIMITS } from '../domain/limits.ts';
import { newId } from '../domain/ids.ts';
import type { ChangeWindowInput } from '../domain/change-windows.ts';
import { mustGetApp } from './catalog.ts';

export function changeWindowView(w: ChangeWindow) {
  return {
    window_id: w.window_id,
    app_id: w.app_id,
    name: w.name,
    kind: w.kind,
    days: w.days,
    start: w.start,
    duration: w.duration,
    time_zone: w.time_zone,
    install_ids: w.install_ids,
    selector: w.selector,
    applies_to: w.applies_to ?? ['branch_run' as const],
    created_at: w.created_at,
  };
}

export function createChangeWindow(ctx: AppContext, orgId: string, appId: string, body: ChangeWindowInput) {
  mustGetApp(ctx, orgId, appId);
  // the count and the insert run in the request's one engine transaction: two creates cannot both pass
  const have = listChangeWindows(ctx.db, appId).length;
  if (have >= LIMITS.changeWindowsPerApp) {
    throw new LimitExceededError(
      'change_windows_per_app',
      `change windows per app: this app has ${have} change windows, the limit is ${LIMITS.changeWindowsPerApp}; delete one to ` +
        `create another`,
    );
  }
  const strangers = (body.install_ids ?? []).filter((id) => {
    const i = getInstallById(ctx.db, id);
    return !i || i.org_id !== orgId || i.app_id !== appId;
  });
  if (strangers.length) {
    throw new InvalidError(
      'install_ids must name installs of this app',
      strangers.map((id) => ({ path: 'install_ids', message: `no install ${id} in this app` })),
    );
  }
  const w = insertChangeWindow(ctx.db, {
    window_id: newId('cw'),
    org_id: orgId,
    app_id: appId,
    name: body.name,
    kind: body.kind,
    days: body.days,
    start: body.start,
    duration: body.duration,
    duration_ms: durationMs(body.duration)!,
    time_zone: body.time_zone,
    install_ids: body.install_ids ?? null,
    selector: body.selector ?? null,
    applies_to: body.applies_to ?? null,
    created_at: new Date(ctx.clock.now()).toISOString(),
  });
  ctx.engine.windowsChanged(orgId, appId);
  return changeWindowView(w);
}

export function listAppChangeWindows(ctx: AppContext, orgId: string, appId: string) {
  mustGetApp(ctx, orgId, appId);
  return listChangeWindows(ctx.db, appId).map(changeWindowView);
}

export function removeChangeWindow(ctx: AppContext, orgId: string, appId: string, windowId: string): void {
  mustGetApp(ctx, orgId, appId);
  if (!getChangeWindow(ctx.db, orgId, appId, windowId)) throw new NotFoundError('change window', windowId);
  deleteChangeWindow(ctx.db, windowId);
  ctx.engine.windowsChanged(orgId, appId);
}
