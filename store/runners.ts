import type { Db } from './db.ts';
import { fromJson, nowIso, toJson } from './db.ts';
import { oneRow } from './rows.ts';
import type { RunnerContext } from '../machines/runner.ts';
import type { RunnerState } from '../src/domain/status.ts';

export interface RunnerRow {
  runner_id: string;
  org_id: string;
  install_id: string | null;
  name: string;
  group_id: string;
  group_type: string;
  state: RunnerState;
  ctx: RunnerContext;
  created_at: string;
}

// biome-ignore lint/suspicious/noExplicitAny: a SQLite row, decoded into its typed shape here
const decode = (r: any): RunnerRow => ({ ...r, ctx: fromJson(r.ctx, { heartbeatSinceCheck: false, lastProcess: null }) });

export function insertRunner(db: Db, r: Omit<RunnerRow, 'created_at' | 'state' | 'ctx'>): void {
  db.prepare(
    'INSERT INTO runners (runner_id, org_id, install_id, name, group_id, group_type, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)',
  ).run(r.runner_id, r.org_id, r.install_id, r.name, r.group_id, r.group_type, nowIso());
}

export function getRunner(db: Db, orgId: string, id: string): RunnerRow | undefined {
  return oneRow(db, 'SELECT * FROM runners WHERE org_id = ? AND runner_id = ?', decode, orgId, id);
}

export function orgRunner(db: Db, orgId: string): RunnerRow | undefined {
  return oneRow(db, "SELECT * FROM runners WHERE org_id = ? AND group_type = 'org'", decode, orgId);
}

export function listRunners(db: Db): RunnerRow[] {
  return db.prepare('SELECT * FROM runners ORDER BY rowid').all().map(decode);
}

export function saveRunnerState(db: Db, id: string, state: RunnerState, ctx: RunnerContext): void {
  db.prepare('UPDATE runners SET state = ?, ctx = ? WHERE runner_id = ?').run(state, toJson(ctx), id);
}
