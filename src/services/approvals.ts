// Steps awaiting an approval response across an org: install workflows and app branch runs alike.
import type { AppContext } from '../context.ts';
import { countAwaitingApprovalSteps, getWorkflow, listAwaitingApprovalSteps } from '../../store/workflows.ts';
import { stepView, workflowOwner, workflowSummary, type StepView, type WorkflowOwner, type WorkflowSummary } from './workflows.ts';

export interface PendingApproval {
  workflow: WorkflowSummary & { owner: WorkflowOwner };
  step: StepView;
}

/** Every step of the org awaiting approval, oldest workflow first, each with its workflow and owner. */
export function listPendingApprovals(ctx: AppContext, orgId: string): PendingApproval[] {
  const workflows = new Map<string, PendingApproval['workflow']>();
  return listAwaitingApprovalSteps(ctx.db, orgId).map((s) => {
    let wf = workflows.get(s.workflow_id);
    if (!wf) {
      const row = getWorkflow(ctx.db, s.workflow_id)!;
      wf = { ...workflowSummary(row), owner: workflowOwner(ctx, orgId, row.owner_type, row.owner_id) };
      workflows.set(s.workflow_id, wf);
    }
    return { workflow: wf, step: stepView(s) };
  });
}

export function countPendingApprovals(ctx: AppContext, orgId: string): number {
  return countAwaitingApprovalSteps(ctx.db, orgId);
}
