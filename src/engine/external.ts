// Workflows the engine did not start, reported by a producer (CONTRACT 5.2
// svc.ingest.<org>.workflows.<id>): recorded and stepped through the same machines as the engine's own.
import type { Db } from '../../store/db.ts';
import { findOrgWorkflow, getStep, getWorkflow, insertStep, insertWorkflow, listSteps } from '../../store/workflows.ts';
import { newId } from '../domain/ids.ts';
import type { StepEvent } from '../../machines/index.ts';
import { InvalidError } from '../domain/errors.ts';
import type { WorkflowMessage } from '../domain/producer-messages.ts';
import type { Tx } from './transaction.ts';
import type { IngestResult, Workflows } from './workflows.ts';

export function reportExternalWorkflow(t: Tx, db: Db, workflows: Workflows, orgId: string, workflowId: string, msg: WorkflowMessage): IngestResult {
  if (msg.workflow && msg.workflow.id !== workflowId) throw new InvalidError(`workflow.id ${msg.workflow.id} does not match the subject's ${workflowId}`);
  let wf = findOrgWorkflow(db, orgId, workflowId);
  if (wf && !wf.external) throw new InvalidError(`workflow ${workflowId} is run by the engine; producers cannot report it`);
  if (!wf) {
    if (!msg.workflow) throw new InvalidError('the first message of a workflow must carry workflow {id, type, owner_id, owner_type}');
    // Ids are the org's own: another org's workflow of the same id is a different workflow, stored
    // under an id of its own, and this org learns nothing of it.
    const storedId = getWorkflow(db, workflowId) ? newId('wf') : workflowId;
    insertWorkflow(db, {
      workflow_id: storedId,
      org_id: orgId,
      type: msg.workflow.type,
      owner_id: msg.workflow.owner_id,
      owner_type: msg.workflow.owner_type,
      parent: msg.workflow.parent ?? null,
      action_id: msg.workflow.action_id ?? null,
      external: true,
      external_id: workflowId,
      status: 'pending',
      error: null,
      params: {},
      started_at: null,
      finished_at: null,
    });
    wf = getWorkflow(db, storedId)!;
  }
  const extra = msg.duration_ms !== undefined ? { duration_ms: msg.duration_ms } : undefined;
  if (msg.kind === 'workflow') {
    const accepted =
      msg.transition === 'started'
        ? workflows.workflowEvent(t, wf, { type: 'start' }, extra)
        : workflows.workflowEvent(t, wf, { type: 'finish', outcome: msg.transition, error: msg.error, stepStatuses: listSteps(db, wf.workflow_id).map((s) => s.status) }, extra);
    if (accepted) return 'accepted';
    return wf.status === msg.transition ? 'duplicate' : 'ignored';
  }
  const s = msg.step!;
  let step = getStep(db, wf.workflow_id, s.id);
  if (!step) {
    insertStep(db, {
      step_id: s.id,
      workflow_id: wf.workflow_id,
      org_id: orgId,
      idx: s.idx,
      name: s.name,
      target_type: s.target_type ?? null,
      target_id: s.target_id ?? null,
      component_id: s.component_id ?? null,
      sandbox_id: s.sandbox_id ?? null,
      execution_type: s.execution_type,
      operation: null,
      status: 'pending',
      error: null,
      plan: null,
      approval: null,
      params: {},
      started_at: null,
      finished_at: null,
    });
    step = getStep(db, wf.workflow_id, s.id)!;
  }
  const ev: StepEvent =
    msg.transition === 'started'
      ? { type: 'start' }
      : msg.transition === 'succeeded'
        ? { type: 'succeed' }
        : msg.transition === 'failed'
          ? { type: 'fail', error: msg.error || 'failed' }
          : { type: 'cancel' };
  if (workflows.stepEvent(t, wf, step, ev, extra)) return 'accepted';
  return step.status === msg.transition ? 'duplicate' : 'ignored';
}
