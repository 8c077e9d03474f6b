// Approvals and cancel (CONTRACT 4.2): an approval step (it awaits a person's answer with its
// group's plan), that answer, and the cancel of a workflow with its child workflows.
//
// Under an approval policy (CONTRACT 10.4: the app's, made stricter by the run's own): the step
// keeps every response the policy counted (its params' `policy_responses`) and shows each rule as
// "k of n" (its approval's `rules`, `rejections`, `expires_at`); each counted response emits
// `response_recorded`, and the policy's decision (machines/approval-policy.ts, pure) approves or
// rejects it naming the deciding rule. A plan the policy's auto_approve admits is approved at once,
// by the policy. Past expires_after the clock (Wakeups, and the scheduler's tick after a restart)
// fails it `approval_expired`. The policy is read when it is used: a change applies to steps still
// waiting (`policyChanged`). Without a policy nothing here differs from before.
import {
  cancelWorkflowJobs,
  getStep,
  getWorkflow,
  listChildWorkflows,
  listSteps,
  updateStep,
  type StepRow,
  type WorkflowRow,
} from '../../../store/workflows.ts';
import type { Db } from '../../../store/db.ts';
import { isFinal } from '../../domain/status.ts';
import { ApprovalRefusedError, ConflictError, NotFoundError } from '../../domain/errors.ts';
import { approvalPolicySchema, effectivePolicy, type ApprovalPolicy } from '../../domain/approval-policy.ts';
import type { Actor } from '../../domain/scopes.ts';
import { getAppApprovalPolicy, listExpiringApprovalSteps, listOrgAwaitingApprovalSteps } from '../../../store/approval-policies.ts';
import { listTokens, liveTokenById } from '../../../store/orgs.ts';
import {
  admits,
  autoApproval,
  decide,
  expiresAtMs,
  judgeResponse,
  policyResponseSchema,
  type PolicyDecision,
  type PolicyResponse,
} from '../../../machines/approval-policy.ts';
import type { Wakeups } from '../wakeups.ts';
import { runParamsOf } from './state.ts';
import type { WorkflowFacts } from '../workflow-facts.ts';
import type { ApprovalAnswer } from '../../domain/facts.ts';
import type { Tx } from '../transaction.ts';
import { groupPlan } from '../rollout-plans.ts';
import type { StepHandler } from './handlers.ts';
import type { RunControl } from './run-control.ts';

export class ApprovalsAndCancel implements StepHandler {
  constructor(
    private readonly db: Db,
    private readonly facts: WorkflowFacts,
    private readonly run: RunControl,
    private readonly wakeups?: Wakeups,
  ) {}

  /**
   * Begin an approval step: the group's plan is kept on it and it awaits a person's answer. Ends at
   * once only when its policy's auto_approve approves the plan.
   */
  begin(t: Tx, wf: WorkflowRow, step: StepRow): boolean {
    const plan = groupPlan(this.db, wf, step, Date.parse(t.now));
    const policy = this.policyOf(wf);
    if (policy) return this.beginUnderPolicy(t, wf, step, plan, policy);
    const requested = updateStep(this.db, {
      workflow_id: wf.workflow_id,
      step_id: step.step_id,
      plan,
      approval: { status: 'requested', plan },
    })!;
    this.facts.stepEvent(t, wf, requested, { type: 'request_approval' });
    return false;
  }

  /** An approval has no child workflows. */
  childEnded(): boolean {
    return false;
  }

  respondToApproval(t: Tx, orgId: string, workflowId: string, stepId: string, ...[response, note, actor, via]: ApprovalAnswer): StepRow {
    const wf = getWorkflow(this.db, workflowId);
    if (!wf || wf.org_id !== orgId) throw new NotFoundError('workflow', workflowId);
    const step = getStep(this.db, workflowId, stepId);
    if (!step) throw new NotFoundError('step', stepId);
    if (step.status !== 'awaiting_approval') throw new ConflictError(`step ${step.name} is not awaiting approval (status ${step.status})`);
    const policy = this.policyOf(wf);
    if (policy) return this.respondUnderPolicy(t, wf, step, policy, { response, note, actor: actor ?? null, via });
    const approval = {
      ...(step.approval ?? {}),
      status: response,
      responded_at: t.now,
      ...(note !== undefined ? { note } : {}),
      ...(actor ? { responded_by: actor } : {}),
    };
    delete (approval as { plan?: unknown }).plan;
    const fresh = updateStep(this.db, { workflow_id: workflowId, step_id: stepId, approval })!;
    const ok =
      response === 'approved'
        ? this.facts.stepEvent(t, wf, fresh, { type: 'approve' })
        : this.facts.stepEvent(t, wf, fresh, { type: 'reject', error: `approval rejected${note ? `: ${note}` : ''}` });
    if (!ok) throw new ConflictError(`step ${step.name} is not awaiting approval`);
    // keep the plan on the step for GET workflow
    updateStep(this.db, { workflow_id: workflowId, step_id: stepId, approval: { ...approval, plan: step.plan ?? undefined } });
    this.run.advance(t, workflowId);
    return getStep(this.db, workflowId, stepId)!;
  }

  // ------------------------------------------------------------------ under an approval policy (CONTRACT 10.4)

  /** The policy governing a run's approval steps: its app's, made stricter by the run's own; null without either. */
  policyOf(wf: WorkflowRow): ApprovalPolicy | null {
    const appId = runParamsOf(wf).app_id;
    if (!appId) return null;
    const own = wf.params.approval_policy ? approvalPolicySchema.parse(wf.params.approval_policy) : null;
    return effectivePolicy(getAppApprovalPolicy(this.db, appId), own);
  }

  private beginUnderPolicy(t: Tx, wf: WorkflowRow, step: StepRow, plan: unknown, policy: ApprovalPolicy): boolean {
    const auto = autoApproval(policy, plan);
    const decision = decide(policy, [], starterOf(wf));
    const expires = expiresAtMs(policy, Date.parse(t.now));
    const requested = updateStep(this.db, {
      workflow_id: wf.workflow_id,
      step_id: step.step_id,
      plan,
      params: { ...step.params, policy_responses: [] },
      approval: {
        status: 'requested',
        plan,
        ...viewOf(decision, expires),
        ...(auto && !auto.approve ? { auto_approve_declined: auto.reason } : {}),
      },
    })!;
    this.facts.stepEvent(t, wf, requested, { type: 'request_approval' });
    if (auto?.approve) {
      this.settle(t, wf, getStep(this.db, wf.workflow_id, step.step_id)!, 'approved', {
        responded_by: { type: 'policy', reason: auto.reason },
      });
      return true;
    }
    if (expires !== null) this.wakeups?.approvalsAt(expires);
    return false;
  }

  private respondUnderPolicy(
    t: Tx,
    wf: WorkflowRow,
    step: StepRow,
    policy: ApprovalPolicy,
    a: { response: 'approved' | 'rejected'; note?: string; actor: Actor | null; via?: 'link' },
  ): StepRow {
    const rules = policy.rules.map((r) => r.name).join(', ');
    const token = a.actor?.token_id ? liveTokenById(this.db, a.actor.token_id) : undefined;
    if (!token || token.org_id !== wf.org_id)
      throw new ApprovalRefusedError(
        'not_an_approver',
        `step ${step.name}: only tokens its approval policy admits may answer (rules: ${rules})`,
      );
    const who = { token_id: token.token_id, token_name: a.actor?.token_name ?? token.name, scope: token.scope };
    const starter = starterOf(wf);
    const j = judgeResponse(policy, responsesOf(step), who, starter, {
      response: a.response,
      at: t.now,
      note: a.note,
      ...(a.via ? { via: 'via link' } : {}),
    });
    const tokenName = who.token_name ?? who.token_id;
    switch (j.kind) {
      case 'self_approval':
        throw new ApprovalRefusedError(
          'self_approval',
          `token ${tokenName} started this run; the approval policy of step ${step.name} prevents self-approval`,
        );
      case 'not_an_approver':
        throw new ApprovalRefusedError(
          'not_an_approver',
          `token ${tokenName} is not an approver of step ${step.name}: no rule of its approval policy admits it (rules: ${rules})`,
        );
      case 'repeated':
        return step;
      case 'changed':
        throw new ConflictError(`token ${tokenName} already answered step ${step.name} ${j.previous}; its first answer stands`);
    }
    const decision = decide(policy, j.responses, starter, this.pools(wf.org_id, policy, starter));
    const expires = expiresAtMs(policy, Date.parse(step.started_at ?? t.now));
    const fresh = updateStep(this.db, {
      workflow_id: wf.workflow_id,
      step_id: step.step_id,
      params: { ...step.params, policy_responses: j.responses },
      approval: { ...(step.approval ?? { status: 'requested' }), ...viewOf(decision, expires) },
    })!;
    const actor = { token_id: who.token_id, token_name: who.token_name };
    this.facts.responseRecorded(t, wf, fresh, {
      status: 'requested',
      response: a.response,
      responded_at: t.now,
      responded_by: actor,
      ...(a.note !== undefined ? { note: a.note } : {}),
      rules: decision.rules,
      ...(expires !== null ? { expires_at: new Date(expires).toISOString() } : {}),
    });
    if (decision.status !== 'requested') {
      this.settle(t, wf, fresh, decision.status, {
        responded_by: actor,
        note: a.note,
        decided_by_rule: decision.decided_by_rule!,
      });
      this.run.advance(t, wf.workflow_id);
    }
    return getStep(this.db, wf.workflow_id, step.step_id)!;
  }

  /** Approve or reject a step as its policy decided (the plan left out of the event, as for any response). */
  private settle(
    t: Tx,
    wf: WorkflowRow,
    step: StepRow,
    status: 'approved' | 'rejected',
    by: { responded_by: NonNullable<StepRow['approval']>['responded_by']; note?: string; decided_by_rule?: string },
  ): void {
    const approval: NonNullable<StepRow['approval']> = {
      ...(step.approval ?? {}),
      status,
      responded_at: t.now,
      responded_by: by.responded_by,
      ...(by.note !== undefined ? { note: by.note } : {}),
      ...(by.decided_by_rule ? { decided_by_rule: by.decided_by_rule } : {}),
    };
    delete approval.plan;
    const fresh = updateStep(this.db, { workflow_id: wf.workflow_id, step_id: step.step_id, approval })!;
    const rule = by.decided_by_rule ? ` (rule ${by.decided_by_rule})` : '';
    const ok =
      status === 'approved'
        ? this.facts.stepEvent(t, wf, fresh, { type: 'approve' })
        : this.facts.stepEvent(t, wf, fresh, { type: 'reject', error: `approval rejected${rule}${by.note ? `: ${by.note}` : ''}` });
    if (!ok) throw new ConflictError(`step ${step.name} is not awaiting approval`);
    updateStep(this.db, { workflow_id: wf.workflow_id, step_id: step.step_id, approval: { ...approval, plan: step.plan ?? undefined } });
  }

  /** How many of the org's live tokens that may answer each rule admits (for `reject: majority`). */
  private pools(orgId: string, policy: ApprovalPolicy, starter: string | null): number[] {
    if (policy.reject !== 'majority') return [];
    const tokens = listTokens(this.db, orgId).filter(
      (x) => !x.revoked_at && (x.scope === 'deploy' || x.scope === 'admin') && !(policy.prevent_self_approval && x.token_id === starter),
    );
    return policy.rules.map((r) => tokens.filter((x) => admits(r, { token_id: x.token_id, token_name: x.name, scope: x.scope })).length);
  }

  /**
   * Steps whose expiry has passed on the engine's clock fail `approval_expired` (the run then fails
   * as on a rejection: its later groups cancelled). Returns the runs to carry on.
   */
  expireDue(t: Tx): string[] {
    const now = Date.parse(t.now);
    const runs: string[] = [];
    for (const s of listExpiringApprovalSteps(this.db)) {
      const at = s.approval?.expires_at;
      if (typeof at !== 'string' || Date.parse(at) > now) continue;
      const wf = getWorkflow(this.db, s.workflow_id);
      if (!wf || isFinal(wf.status)) continue;
      const approval: NonNullable<StepRow['approval']> = { ...s.approval!, status: 'expired' };
      delete approval.plan;
      const fresh = updateStep(this.db, { workflow_id: s.workflow_id, step_id: s.step_id, approval })!;
      if (!this.facts.stepEvent(t, wf, fresh, { type: 'expire' })) continue;
      updateStep(this.db, { workflow_id: s.workflow_id, step_id: s.step_id, approval: { ...approval, plan: s.plan ?? undefined } });
      runs.push(s.workflow_id);
    }
    for (const id of runs) this.run.advance(t, id);
    return runs;
  }

  /** Whether any step is due to expire by `nowMs` (the scheduler's cheap look before a transaction). */
  anyDue(nowMs: number): boolean {
    return listExpiringApprovalSteps(this.db).some(
      (s) => typeof s.approval?.expires_at === 'string' && Date.parse(s.approval.expires_at) <= nowMs,
    );
  }

  /**
   * An app's policy changed (CONTRACT 10.4: it applies to steps still waiting): each waiting step of
   * its runs is looked at afresh under the policy of now; one it decides is approved or rejected,
   * one past its new expiry expires; the rest show the new rules and expiry.
   */
  policyChanged(t: Tx, orgId: string, appId: string): void {
    for (const s of listOrgAwaitingApprovalSteps(this.db, orgId)) {
      const wf = getWorkflow(this.db, s.workflow_id);
      if (!wf || isFinal(wf.status) || runParamsOf(wf).app_id !== appId) continue;
      const policy = this.policyOf(wf);
      const base = { ...(s.approval ?? { status: 'requested' }) };
      for (const k of ['rules', 'rejections', 'expires_at', 'auto_approve_declined'] as const) delete base[k];
      if (!policy) {
        updateStep(this.db, { workflow_id: s.workflow_id, step_id: s.step_id, approval: base });
        continue;
      }
      const starter = starterOf(wf);
      const decision = decide(policy, responsesOf(s), starter, this.pools(orgId, policy, starter));
      const expires = expiresAtMs(policy, Date.parse(s.started_at ?? t.now));
      const fresh = updateStep(this.db, {
        workflow_id: s.workflow_id,
        step_id: s.step_id,
        approval: { ...base, ...viewOf(decision, expires) },
      })!;
      if (decision.status !== 'requested') {
        const last = responsesOf(s).at(-1);
        this.settle(t, wf, fresh, decision.status, {
          responded_by: last ? { token_id: last.token_id, token_name: last.token_name } : { type: 'policy', reason: 'policy changed' },
          decided_by_rule: decision.decided_by_rule!,
        });
        this.run.advance(t, wf.workflow_id);
      } else if (expires !== null) this.wakeups?.approvalsAt(expires);
    }
    this.expireDue(t);
  }

  cancel(t: Tx, orgId: string, workflowId: string): WorkflowRow {
    const wf = getWorkflow(this.db, workflowId);
    if (!wf || wf.org_id !== orgId) throw new NotFoundError('workflow', workflowId);
    if (isFinal(wf.status)) throw new ConflictError(`workflow ${workflowId} already ${wf.status}`);
    this.cancelTree(t, wf);
    return getWorkflow(this.db, workflowId)!;
  }

  private cancelTree(t: Tx, wf: WorkflowRow): void {
    for (const s of listSteps(this.db, wf.workflow_id)) {
      // the step first, so that its children ending cancelled do not fail it
      if (!isFinal(s.status)) this.facts.stepEvent(t, wf, s, { type: 'cancel' });
      for (const child of listChildWorkflows(this.db, wf.workflow_id, s.step_id)) {
        if (!isFinal(child.status)) this.cancelTree(t, child);
      }
    }
    cancelWorkflowJobs(this.db, wf.workflow_id);
    const fresh = getWorkflow(this.db, wf.workflow_id)!;
    if (!isFinal(fresh.status)) this.run.finish(t, fresh, 'cancelled');
  }
}

/** The token that started a run (kept in its params when started through the API), or null. */
function starterOf(wf: WorkflowRow): string | null {
  const by = wf.params.started_by as { token_id?: string | null } | undefined;
  return by?.token_id ?? null;
}

/** The responses a step's policy counted so far. */
function responsesOf(step: StepRow): PolicyResponse[] {
  const r = step.params.policy_responses;
  return Array.isArray(r) ? r.map((x) => policyResponseSchema.parse(x)) : [];
}

/** The step's approval view under its policy (CONTRACT 10.4): each rule as k of n, the rejections, the expiry. */
function viewOf(d: PolicyDecision, expiresMs: number | null) {
  return { rules: d.rules, rejections: d.rejections, expires_at: expiresMs === null ? null : new Date(expiresMs).toISOString() };
}
