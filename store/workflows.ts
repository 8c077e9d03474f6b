import type { RespondedBy } from '../src/domain/approval-policy.ts';
import type { Db } from './db.ts';
import { fromJson, nowIso, toJson } from './db.ts';
import type { ParentRef } from '../src/domain/facts.ts';
import type { OwnerType, ExecutionType } from '../src/domain/status.ts';

import type { Status, StepStatus, WorkflowStatus } from '../src/domain/status.ts';

export interface WorkflowRow {
  workflow_id: string;
  org_id: string;
  type: string;
  owner_id: string;
  owner_type: OwnerType;
  parent: ParentRef | null;
  action_id: string | null;
  external: boolean;
  /** the id a producer reported an external workflow under (unique in its org); null for the engine's own */
  external_id: string | null;
  status: WorkflowStatus;
  error: string | null;
  params: Record<string, unknown>;
  started_at: string | null;
  finished_at: string | null;
  created_at: string;
}

/** A workflow as it is inserted (the store sets created_at). */
export type WorkflowFields = Omit<WorkflowRow, 'created_at'>;

export interface StepRow {
  step_id: string;
  workflow_id: string;
  org_id: string;
  idx: number;
  name: string;
  target_type: string | null;
  target_id: string | null;
  component_id: string | null;
  sandbox_id: string | null;
  execution_type: ExecutionType;
  operation: string | null;
  status: StepStatus;
  error: string | null;
  plan: unknown | null;
  /** the approval's record and view; under a policy (CONTRACT 10.4) also its rules, rejections and expiry */
  approval: {
    status: string;
    plan?: unknown;
    note?: string;
    responded_at?: string;
    responded_by?: RespondedBy;
    [k: string]: unknown;
  } | null;
  params: Record<string, unknown>;
  started_at: string | null;
  finished_at: string | null;
}

export interface JobRow {
  job_id: string;
  org_id: string;
  runner_id: string;
  workflow_id: string;
  step_id: string;
  payload: Record<string, unknown>;
  status: 'queued' | 'sent' | 'started' | 'done' | 'cancelled';
  sent_at: string | null;
  created_at: string;
}

export interface VersionRow {
  version_id: string;
  install_id: string;
  org_id: string;
  version: number;
  app_config_id: string;
  old_app_config_id: string | null;
  workflow_id: string | null;
  status: Status;
  created_at: string;
}

// biome-ignore lint/suspicious/noExplicitAny: a SQLite row, decoded into its typed shape here
const decodeWf = (r: any): WorkflowRow => ({
  ...r,
  parent: fromJson(r.parent, null),
  external: !!r.external,
  params: fromJson(r.params, {}),
});
// biome-ignore lint/suspicious/noExplicitAny: a SQLite row, decoded into its typed shape here
const decodeStep = (r: any): StepRow => ({
  ...r,
  plan: fromJson(r.plan, null),
  approval: fromJson(r.approval, null),
  params: fromJson(r.params, {}),
});
// biome-ignore lint/suspicious/noExplicitAny: a SQLite row, decoded into its typed shape here
const decodeJob = (r: any): JobRow => ({ ...r, payload: fromJson(r.payload, {}) });

/** Insert a workflow, in `state` when given (else in the one `w` has); returns the row as stored. */
export function insertWorkflow(
  db: Db,
  w: WorkflowFields,
  state?: Pick<WorkflowFields, 'status' | 'error' | 'started_at' | 'finished_at'>,
): WorkflowRow {
  const s = state ?? w;
  // every field named (not a spread of w): a row of one shape, so that what reads it stays monomorphic
  const row: WorkflowRow = {
    workflow_id: w.workflow_id,
    org_id: w.org_id,
    type: w.type,
    owner_id: w.owner_id,
    owner_type: w.owner_type,
    parent: w.parent,
    action_id: w.action_id,
    external: w.external,
    external_id: w.external_id,
    status: s.status,
    error: s.error,
    params: w.params,
    started_at: s.started_at,
    finished_at: s.finished_at,
    created_at: nowIso(),
  };
  db.prepare(
    `INSERT INTO workflows (workflow_id, org_id, type, owner_id, owner_type, parent, action_id, external, external_id,
       status, error, params, started_at, finished_at, created_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  ).run(
    row.workflow_id,
    row.org_id,
    row.type,
    row.owner_id,
    row.owner_type,
    toJson(row.parent),
    row.action_id,
    row.external ? 1 : 0,
    row.external_id,
    row.status,
    row.error,
    toJson(row.params) ?? '{}',
    row.started_at,
    row.finished_at,
    row.created_at,
  );
  return row;
}

export function getWorkflow(db: Db, id: string): WorkflowRow | undefined {
  const r = db.prepare('SELECT * FROM workflows WHERE workflow_id = ?').get(id);
  return r ? decodeWf(r) : undefined;
}

/** The id the outside knows a workflow by: the producer's for an external workflow, else the engine's. */
export function publicWorkflowId(w: WorkflowFields): string {
  return w.external_id ?? w.workflow_id;
}

/** An org's workflow by the id the outside knows it by (or the id it is stored under). */
export function findOrgWorkflow(db: Db, orgId: string, id: string): WorkflowRow | undefined {
  return lookupReportedWorkflow(db, orgId, id).workflow;
}

/**
 * What a producer's workflow id names: the org's workflow known by it (the one it reported under
 * that id, else the one stored under it), and whether any org's workflow is stored under it (then a
 * new external workflow of that id needs an id of its own). Each an index search: the one stored
 * under the id by the primary key; the org's that reported it but is stored under an id of its own
 * (the id was another org's) by the index on (org, external id), which holds only those
 * (migrations.ts), and only looked for when the first is not already the answer.
 */
export function lookupReportedWorkflow(db: Db, orgId: string, id: string): { workflow: WorkflowRow | undefined; idTaken: boolean } {
  const row = db.prepare('SELECT * FROM workflows WHERE workflow_id = ?').get(id);
  const stored = row ? decodeWf(row) : undefined;
  const own = stored?.org_id === orgId ? stored : undefined;
  if (own?.external_id === id) return { workflow: own, idTaken: true };
  const renamed = db.prepare('SELECT * FROM workflows WHERE org_id = ? AND external_id = ? AND external_id <> workflow_id').get(orgId, id);
  return { workflow: renamed ? decodeWf(renamed) : own, idTaken: stored !== undefined };
}

/**
 * The org's `limit` newest workflows owned by an install, or of one of `types` whatever owns them
 * (an app's rollouts): one read of the org's rows, not one per install and app.
 */
export function listRecentWorkflows(db: Db, orgId: string, types: readonly string[], limit: number): WorkflowRow[] {
  const marks = types.map(() => '?').join(', ') || 'NULL';
  return db
    .prepare(
      `SELECT * FROM workflows WHERE org_id = ? AND (owner_type = 'installs' OR type IN (${marks}))
       ORDER BY created_at DESC, rowid DESC LIMIT ?`,
    )
    .all(orgId, ...types, limit)
    .map(decodeWf);
}

export function listOwnerWorkflows(db: Db, orgId: string, ownerId: string): WorkflowRow[] {
  return db.prepare('SELECT * FROM workflows WHERE org_id = ? AND owner_id = ? ORDER BY rowid DESC').all(orgId, ownerId).map(decodeWf);
}

export function listChildWorkflows(db: Db, parentWorkflowId: string, parentStepId: string): WorkflowRow[] {
  return db
    .prepare(
      "SELECT * FROM workflows WHERE json_extract(parent, '$.workflow_id') = ? AND json_extract(parent, '$.step_id') = ? ORDER BY rowid",
    )
    .all(parentWorkflowId, parentStepId)
    .map(decodeWf);
}

export function updateWorkflowStatus(
  db: Db,
  id: string,
  status: WorkflowStatus,
  fields: { error?: string | null; started_at?: string; finished_at?: string } = {},
): void {
  db.prepare(
    'UPDATE workflows SET status = ?, error = COALESCE(?, error), started_at = COALESCE(?, started_at), ' +
      'finished_at = COALESCE(?, finished_at) WHERE workflow_id = ?',
  ).run(status, fields.error ?? null, fields.started_at ?? null, fields.finished_at ?? null, id);
}

/** Replace a workflow's params; returns the row as updated. */
export function setWorkflowParams(db: Db, id: string, params: Record<string, unknown>): WorkflowRow | undefined {
  const r = db.prepare('UPDATE workflows SET params = ? WHERE workflow_id = ? RETURNING *').get(toJson(params) ?? '{}', id);
  return r ? decodeWf(r) : undefined;
}

// Health gates baking right now (the scheduler's tick, and every health verdict, look at them):
// found through the partial index steps_baking (migration 7), as small as the number of bakes.
const BAKING_WHERE = `status = 'started' AND json_extract(params, '$.kind') = 'bake'`;

/** Every started bake step (of one org, or of all). */
export function listBakingSteps(db: Db, orgId?: string): StepRow[] {
  return listStepsWhere(db, 'steps_baking', BAKING_WHERE, orgId);
}

/**
 * The steps `where` selects, of one org or of all, in the order they were stored; across orgs
 * through the partial index `index` (whose WHERE is `where`: as small as what it selects).
 */
export function listStepsWhere(db: Db, index: string, where: string, orgId?: string): StepRow[] {
  const rows =
    orgId === undefined
      ? db.prepare(`SELECT * FROM steps INDEXED BY ${index} WHERE ${where} ORDER BY rowid`).all()
      : db.prepare(`SELECT * FROM steps WHERE ${where} AND org_id = ? ORDER BY rowid`).all(orgId);
  return rows.map(decodeStep);
}

/** Insert a step; returns the row as stored. */
export function insertStep(db: Db, s: StepRow): StepRow {
  db.prepare(
    `INSERT INTO steps (step_id, workflow_id, org_id, idx, name, target_type, target_id, component_id, sandbox_id, execution_type,
       operation, status, error, plan, approval, params, started_at, finished_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  ).run(
    s.step_id,
    s.workflow_id,
    s.org_id,
    s.idx,
    s.name,
    s.target_type,
    s.target_id,
    s.component_id,
    s.sandbox_id,
    s.execution_type,
    s.operation,
    s.status,
    s.error,
    toJson(s.plan),
    toJson(s.approval),
    toJson(s.params) ?? '{}',
    s.started_at,
    s.finished_at,
  );
  return s;
}

export function listSteps(db: Db, workflowId: string): StepRow[] {
  return db.prepare('SELECT * FROM steps WHERE workflow_id = ? ORDER BY idx, rowid').all(workflowId).map(decodeStep);
}

export function getStep(db: Db, workflowId: string, stepId: string): StepRow | undefined {
  const r = db.prepare('SELECT * FROM steps WHERE workflow_id = ? AND step_id = ?').get(workflowId, stepId);
  return r ? decodeStep(r) : undefined;
}

/** Update the given fields of a step; returns the row as updated (undefined when there is no such step). */
export function updateStep(
  db: Db,
  s: Pick<StepRow, 'workflow_id' | 'step_id'> & Partial<Omit<StepRow, 'workflow_id' | 'step_id'>>,
): StepRow | undefined {
  const sets: string[] = [];
  const vals: unknown[] = [];
  for (const [k, v] of Object.entries(s)) {
    if (k === 'workflow_id' || k === 'step_id' || v === undefined) continue;
    sets.push(`${k} = ?`);
    vals.push(k === 'plan' || k === 'approval' || k === 'params' ? toJson(v) : v);
  }
  if (!sets.length) return getStep(db, s.workflow_id, s.step_id);
  const r = db
    .prepare(`UPDATE steps SET ${sets.join(', ')} WHERE workflow_id = ? AND step_id = ? RETURNING *`)
    .get(...vals, s.workflow_id, s.step_id);
  return r ? decodeStep(r) : undefined;
}

export function insertJob(db: Db, j: Omit<JobRow, 'created_at' | 'sent_at'>): void {
  db.prepare(
    'INSERT INTO jobs (job_id, org_id, runner_id, workflow_id, step_id, payload, status, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
  ).run(j.job_id, j.org_id, j.runner_id, j.workflow_id, j.step_id, JSON.stringify(j.payload), j.status, nowIso());
}

export function getJob(db: Db, orgId: string, jobId: string): JobRow | undefined {
  const r = db.prepare('SELECT * FROM jobs WHERE org_id = ? AND job_id = ?').get(orgId, jobId);
  return r ? decodeJob(r) : undefined;
}

export function setJobStatus(db: Db, jobId: string, status: JobRow['status']): void {
  db.prepare('UPDATE jobs SET status = ? WHERE job_id = ?').run(status, jobId);
}

export function markJobSent(db: Db, jobId: string, atIso: string): void {
  db.prepare("UPDATE jobs SET status = CASE WHEN status = 'queued' THEN 'sent' ELSE status END, sent_at = ? WHERE job_id = ?").run(
    atIso,
    jobId,
  );
}

/** Queue again every job a runner reported started and has not finished; returns how many. */
export function requeueStartedJobs(db: Db): number {
  return db.prepare("UPDATE jobs SET status = 'queued' WHERE status = 'started'").run().changes;
}

/** Jobs to (re)send: queued ones, and sent ones not started since `cutoffIso`. */
export function jobsToSend(db: Db, cutoffIso: string): JobRow[] {
  const cutoff = cutoffIso;
  return db
    .prepare("SELECT * FROM jobs WHERE status = 'queued' OR (status = 'sent' AND sent_at < ?) ORDER BY rowid")
    .all(cutoff)
    .map(decodeJob);
}

export function cancelWorkflowJobs(db: Db, workflowId: string): void {
  db.prepare("UPDATE jobs SET status = 'cancelled' WHERE workflow_id = ? AND status IN ('queued', 'sent', 'started')").run(workflowId);
}

export function insertVersion(db: Db, v: Omit<VersionRow, 'created_at' | 'version'>): VersionRow {
  const { n } = db.prepare('SELECT COALESCE(MAX(version), 0) + 1 AS n FROM app_config_versions WHERE install_id = ?').get(v.install_id) as {
    n: number;
  };
  const row: VersionRow = { ...v, version: n, created_at: nowIso() };
  db.prepare(
    `INSERT INTO app_config_versions (version_id, install_id, org_id, version, app_config_id, old_app_config_id, workflow_id, status,
       created_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  ).run(
    row.version_id,
    row.install_id,
    row.org_id,
    row.version,
    row.app_config_id,
    row.old_app_config_id,
    row.workflow_id,
    row.status,
    row.created_at,
  );
  return row;
}

export function listVersions(db: Db, installId: string): VersionRow[] {
  return db.prepare('SELECT * FROM app_config_versions WHERE install_id = ? ORDER BY version DESC').all(installId) as VersionRow[];
}

export function getVersion(db: Db, installId: string, versionId: string): VersionRow | undefined {
  return db.prepare('SELECT * FROM app_config_versions WHERE install_id = ? AND version_id = ?').get(installId, versionId) as
    | VersionRow
    | undefined;
}

export function previousVersion(db: Db, installId: string, version: number): VersionRow | undefined {
  return db
    .prepare('SELECT * FROM app_config_versions WHERE install_id = ? AND version < ? ORDER BY version DESC LIMIT 1')
    .get(installId, version) as VersionRow | undefined;
}

export function setVersionStatusForWorkflow(db: Db, workflowId: string, status: Status): void {
  db.prepare('UPDATE app_config_versions SET status = ? WHERE workflow_id = ?').run(status, workflowId);
}

// Steps waiting for an approval response, across an org (the dashboard's approvals page and its
// navigation count, on every page): found through the partial index steps_awaiting_approval
// (migration 4), so the cost follows the number of waiting steps, not the org's history.
const AWAITING_FROM = `FROM steps s JOIN workflows w ON w.workflow_id = s.workflow_id
  WHERE s.org_id = ? AND s.status = 'awaiting_approval' AND w.status IN ('pending', 'started')`;

/** An org's steps awaiting approval, oldest workflow first, in step order. */
export function listAwaitingApprovalSteps(db: Db, orgId: string): StepRow[] {
  return db.prepare(`SELECT s.* ${AWAITING_FROM} ORDER BY w.rowid, s.idx`).all(orgId).map(decodeStep);
}

export function countAwaitingApprovalSteps(db: Db, orgId: string): number {
  return (db.prepare(`SELECT COUNT(*) AS n ${AWAITING_FROM}`).get(orgId) as { n: number }).n;
}
