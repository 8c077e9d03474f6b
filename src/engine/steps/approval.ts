// Approvals and cancel (CONTRACT 4.2): an approval step (it awaits a person's answer with its
// group's plan), that answer, and the cancel of a workflow with its child workflows.
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
import { ConflictError, NotFoundError } from '../../domain/errors.ts';
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
  ) {}

  /** Begin an approval step: the group's plan is kept on it and it awaits a person's answer. Never ends at once. */
  begin(t: Tx, wf: WorkflowRow, step: StepRow): boolean {
    const plan = groupPlan(this.db, wf, step, Date.parse(t.now));
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

  respondToApproval(t: Tx, orgId: string, workflowId: string, stepId: string, ...[response, note, actor]: ApprovalAnswer): StepRow {
    const wf = getWorkflow(this.db, workflowId);
    if (!wf || wf.org_id !== orgId) throw new NotFoundError('workflow', workflowId);
    const step = getStep(this.db, workflowId, stepId);
    if (!step) throw new NotFoundError('step', stepId);
    if (step.status !== 'awaiting_approval') throw new ConflictError(`step ${step.name} is not awaiting approval (status ${step.status})`);
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
