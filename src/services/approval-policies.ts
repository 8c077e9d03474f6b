// Approval policies (CONTRACT 10.4): an app's policy (PUT, GET, DELETE), checked against the org's
// tokens (a rule whose token_ids name no token of the org is a 400 naming the rule; token_names may
// name tokens made later). A change runs in the request's engine transaction (with its audit row),
// and the app's runs' steps still waiting are looked at afresh in it.
import type { AppContext } from '../context.ts';
import { deleteAppApprovalPolicy, getAppApprovalPolicy, putAppApprovalPolicy } from '../../store/approval-policies.ts';
import { listTokens } from '../../store/orgs.ts';
import { approvalPolicySchema, effectivePolicy, policyView, type ApprovalPolicy } from '../domain/approval-policy.ts';
import type { Actor, Scope } from '../domain/scopes.ts';
import { getStep, getWorkflow } from '../../store/workflows.ts';
import { judgeResponse, policyResponseSchema } from '../../machines/approval-policy.ts';
import { InvalidError, NotFoundError } from '../domain/errors.ts';
import { mustGetApp } from './catalog.ts';

/** 400 when a rule's token_ids name a token the org does not have (or has revoked). */
export function checkPolicyTokens(ctx: AppContext, orgId: string, policy: ApprovalPolicy, path = ''): void {
  const live = new Set(
    listTokens(ctx.db, orgId)
      .filter((t) => !t.revoked_at)
      .map((t) => t.token_id),
  );
  const details = policy.rules.flatMap((r, i) =>
    (r.approvers.token_ids ?? [])
      .filter((id) => !live.has(id))
      .map((id) => ({ path: `${path}rules.${i}.approvers.token_ids`, message: `rule ${r.name}: ${id} is not a live token of this org` })),
  );
  if (details.length) throw new InvalidError(`approval policy: ${details.map((d) => d.message).join('; ')}`, details);
}

export function getApprovalPolicy(ctx: AppContext, orgId: string, appId: string) {
  mustGetApp(ctx, orgId, appId);
  const p = getAppApprovalPolicy(ctx.db, appId);
  if (!p) throw new NotFoundError(`approval policy of app ${appId}`);
  return policyView(p);
}

export function putApprovalPolicy(ctx: AppContext, orgId: string, appId: string, policy: ApprovalPolicy) {
  mustGetApp(ctx, orgId, appId);
  checkPolicyTokens(ctx, orgId, policy);
  putAppApprovalPolicy(ctx.db, orgId, appId, policy, new Date(ctx.clock.now()).toISOString());
  ctx.engine.approvalPolicyChanged(orgId, appId);
  return policyView(policy);
}

export function deleteApprovalPolicy(ctx: AppContext, orgId: string, appId: string): void {
  mustGetApp(ctx, orgId, appId);
  if (!deleteAppApprovalPolicy(ctx.db, appId)) throw new NotFoundError(`approval policy of app ${appId}`);
  ctx.engine.approvalPolicyChanged(orgId, appId);
}

/**
 * Why a token may not answer a step awaiting approval under its run's policy (CONTRACT 10.4), as the
 * dashboard shows it in place of the form; null when it may (or no policy governs the step).
 */
export function approvalRefusal(ctx: AppContext, workflowId: string, stepId: string, who: Actor, scope: Scope): string | null {
  const wf = getWorkflow(ctx.db, workflowId);
  const step = wf ? getStep(ctx.db, workflowId, stepId) : undefined;
  if (!wf || !step || step.status !== 'awaiting_approval' || !who.token_id) return null;
  const appId = typeof wf.params.app_id === 'string' ? wf.params.app_id : null;
  if (!appId) return null;
  const own = wf.params.approval_policy ? approvalPolicySchema.parse(wf.params.approval_policy) : null;
  const policy = effectivePolicy(getAppApprovalPolicy(ctx.db, appId), own);
  if (!policy) return null;
  const starter = (wf.params.started_by as { token_id?: string } | undefined)?.token_id ?? null;
  const responses = Array.isArray(step.params.policy_responses)
    ? step.params.policy_responses.map((r) => policyResponseSchema.parse(r))
    : [];
  const j = judgeResponse(policy, responses, { token_id: who.token_id, token_name: who.token_name, scope }, starter, {
    response: 'approved',
    at: '',
  });
  const rules = policy.rules.map((r) => r.name).join(', ');
  if (j.kind === 'self_approval') return 'your token started this run, and its approval policy prevents self-approval';
  if (j.kind === 'not_an_approver') return `no rule of this step's approval policy admits your token (rules: ${rules})`;
  if (j.kind === 'repeated' || j.kind === 'changed')
    return `your token already answered this step (${j.kind === 'changed' ? j.previous : 'approved'})`;
  return null;
}
