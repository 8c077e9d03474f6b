// Change windows (CONTRACT 4.3 "Change windows"): an app's allow and deny windows, and the started
// wait steps of installs held by them.
import type { Db } from './db.ts';
import { listStepsWhere, type StepRow } from './workflows.ts';
import { fromJson, toJson } from './db.ts';
import type { RunKind, ScheduleWindow, Weekday, WindowKind } from '../src/domain/change-windows.ts';

export interface ChangeWindow extends ScheduleWindow {
  org_id: string;
  app_id: string;
  name: string;
  kind: WindowKind;
  days: Weekday[];
  /** as given, e.g. `2h` */
  duration: string;
  install_ids: string[] | null;
  selector: { match_labels: Record<string, string> } | null;
  applies_to: RunKind[] | null;
  created_at: string;
}

function decode(r: unknown): ChangeWindow {
  const row = r as Record<string, unknown>;
  return {
    window_id: row.window_id as string,
    org_id: row.org_id as string,
    app_id: row.app_id as string,
    name: row.name as string,
    kind: row.kind as WindowKind,
    days: fromJson<Weekday[]>(row.days as string, []),
    start: row.start as string,
    duration: row.duration as string,
    duration_ms: row.duration_ms as number,
    time_zone: row.time_zone as string,
    install_ids: fromJson<string[] | null>(row.install_ids as string | null, null),
    selector: fromJson<ChangeWindow['selector']>(row.selector as string | null, null),
    applies_to: fromJson<RunKind[] | null>(row.applies_to as string | null, null),
    created_at: row.created_at as string,
  };
}

export function insertChangeWindow(db: Db, w: ChangeWindow): ChangeWindow {
  db.prepare(
    `INSERT INTO change_windows (window_id, org_id, app_id, name, kind, days, start, duration, duration_ms, time_zone, install_ids,
       selector, applies_to, created_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  ).run(
    w.window_id,
    w.org_id,
    w.app_id,
    w.name,
    w.kind,
    JSON.stringify(w.days),
    w.start,
    w.duration,
    w.duration_ms,
    w.time_zone,
    toJson(w.install_ids),
    toJson(w.selector),
    toJson(w.applies_to),
    w.created_at,
  );
  return w;
}

/** An app's windows, oldest first. */
export function listChangeWindows(db: Db, appId: string): ChangeWindow[] {
  return db.prepare('SELECT * FROM change_windows WHERE app_id = ? ORDER BY created_at, rowid').all(appId).map(decode);
}

export function getChangeWindow(db: Db, orgId: string, appId: string, windowId: string): ChangeWindow | undefined {
  const r = db.prepare('SELECT * FROM change_windows WHERE window_id = ? AND org_id = ? AND app_id = ?').get(windowId, orgId, appId);
  return r ? decode(r) : undefined;
}

export function deleteChangeWindow(db: Db, windowId: string): boolean {
  return db.prepare('DELETE FROM change_windows WHERE window_id = ?').run(windowId).changes > 0;
}

const WAITING_WHERE = `status = 'started' AND json_extract(params, '$.kind') = 'window'`;

/** Every started wait step (`wait for change window: …`), of one org or of all, in the order they started. */
export function listWindowWaits(db: Db, orgId?: string): StepRow[] {
  return listStepsWhere(db, 'steps_window_wait', WAITING_WHERE, orgId);
}
