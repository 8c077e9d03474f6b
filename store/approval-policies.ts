// Approval policies (CONTRACT 10.4): an app's policy, and one-time approval links (only the hash of
// a link's secret is kept; a link is used once).
import type { Db } from './db.ts';
import { fromJson, toJson } from './db.ts';
import { listStepsWhere, type StepRow } from './workflows.ts';
import { approvalPolicySchema, type ApprovalPolicy } from '../src/domain/approval-policy.ts';

export function getAppApprovalPolicy(db: Db, appId: string): ApprovalPolicy | null {
  const row = db.prepare('SELECT policy FROM app_approval_policies WHERE app_id = ?').get(appId) as { policy: string } | undefined;
  return row ? approvalPolicySchema.parse(fromJson(row.policy, null)) : null;
}

export function putAppApprovalPolicy(db: Db, orgId: string, appId: string, policy: ApprovalPolicy, at: string): void {
  db.prepare(
    `INSERT INTO app_approval_policies (app_id, org_id, policy, updated_at) VALUES (?, ?, ?, ?)
     ON CONFLICT (app_id) DO UPDATE SET policy = excluded.policy, updated_at = excluded.updated_at`,
  ).run(appId, orgId, toJson(policy), at);
}

/** Whether there was a policy to delete. */
export function deleteAppApprovalPolicy(db: Db, appId: string): boolean {
  return db.prepare('DELETE FROM app_approval_policies WHERE app_id = ?').run(appId).changes > 0;
}

export interface ApprovalLink {
  link_id: string;
  org_id: string;
  workflow_id: string;
  step_id: string;
  token_id: string;
  secret_hash: string;
  expires_at: string;
  used_at: string | null;
  created_at: string;
}

export function insertApprovalLink(db: Db, l: ApprovalLink): void {
  db.prepare(
    `INSERT INTO approval_links (link_id, org_id, workflow_id, step_id, token_id, secret_hash, expires_at, used_at, created_at)
     VALUES (@link_id, @org_id, @workflow_id, @step_id, @token_id, @secret_hash, @expires_at, @used_at, @created_at)`,
  ).run(l);
}

export function getApprovalLinkByHash(db: Db, secretHash: string): ApprovalLink | undefined {
  return db.prepare('SELECT * FROM approval_links WHERE secret_hash = ?').get(secretHash) as ApprovalLink | undefined;
}

/** Mark a link used; false when it was used already (two answers racing: one wins). */
export function useApprovalLink(db: Db, linkId: string, at: string): boolean {
  return db.prepare('UPDATE approval_links SET used_at = ? WHERE link_id = ? AND used_at IS NULL').run(at, linkId).changes > 0;
}

/** Steps awaiting approval that carry an expiry (under a policy with expires_after), across orgs. */
export function listExpiringApprovalSteps(db: Db): StepRow[] {
  return listStepsWhere(
    db,
    'steps_awaiting_approval',
    "status = 'awaiting_approval' AND json_extract(approval, '$.expires_at') IS NOT NULL",
  );
}

/** An org's steps awaiting approval. */
export function listOrgAwaitingApprovalSteps(db: Db, orgId: string): StepRow[] {
  return listStepsWhere(db, 'steps_awaiting_approval', "status = 'awaiting_approval'", orgId);
}
