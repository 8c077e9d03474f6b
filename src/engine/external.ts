// Workflows the engine did not start, reported by a producer (CONTRACT 5.2
// svc.ingest.<org>.workflows.<id>): recorded and stepped through the same machines as the engine's own.
import type { Db } from '../../store/db.ts';
import { getStep, insertWorkflow, listSteps, lookupReportedWorkflow, type StepRow, type WorkflowFields } from '../../store/workflows.ts';
import { newId } from '../domain/ids.ts';
import type { StepEvent } from '../../machines/step.ts';
import type { WorkflowEvent } from '../../machines/workflow.ts';
import { InvalidError } from '../domain/errors.ts';
import type { WorkflowMessage } from '../domain/producer-messages.ts';
import type { StepStatus } from '../domain/status.ts';
import type { Tx } from './transaction.ts';
import type { IngestResult, Unclassified } from './runner-results.ts';
import type { WorkflowFacts } from './workflow-facts.ts';
import { CLASSIFIED_WORKFLOW_TYPES, classifyStep, classifyWorkflow, DRIFT_WORKFLOW_TYPES } from '../events/kinds/shared.ts';

/**
 * Why a producer's workflow or step message can never emit an event (CONTRACT 10.3), or null: a
 * workflow fact whose type svc does not classify (6.1), a step fact whose classification yields
 * nothing. Drift scans are known types whose lifecycle is never delivered by design: no warning.
 */
export function neverEmits(workflowType: string, msg: WorkflowMessage): string | null {
  if (DRIFT_WORKFLOW_TYPES.has(workflowType)) return null;
  const cls = msg.kind === 'workflow' || !msg.step ? classifyWorkflow(workflowType) : classifyStep(workflowType, msg.step);
  if (cls) return null;
  return `unknown workflow type ${workflowType}; known types: ${CLASSIFIED_WORKFLOW_TYPES.join(', ')}`;
}

/**
 * A producer's workflow or step message (CONTRACT 5.2): recorded (accepted, a duplicate, or
 * ignored), and `unclassified` with its warning when it can never emit an event (10.3).
 */
export function reportExternalWorkflow(
  t: Tx,
  db: Db,
  facts: WorkflowFacts,
  orgId: string,
  workflowId: string,
  msg: WorkflowMessage,
): IngestResult | Unclassified {
  if (msg.workflow && msg.workflow.id !== workflowId)
    throw new InvalidError(`workflow.id ${msg.workflow.id} does not match the subject's ${workflowId}`);
  const found = lookupReportedWorkflow(db, orgId, workflowId);
  const result = recordExternal(t, db, facts, orgId, workflowId, msg, found);
  // the type as stored (the first message's), else the one this first message carries
  const warning = neverEmits(found.workflow?.type ?? msg.workflow?.type ?? '', msg);
  return warning === null ? result : { result: 'unclassified', warning };
}

function recordExternal(
  t: Tx,
  db: Db,
  facts: WorkflowFacts,
  orgId: string,
  workflowId: string,
  msg: WorkflowMessage,
  found: ReturnType<typeof lookupReportedWorkflow>,
): IngestResult {
  let wf = found.workflow;
  if (wf && !wf.external) throw new InvalidError(`workflow ${workflowId} is run by the engine; producers cannot report it`);
  const extra = msg.duration_ms !== undefined ? { duration_ms: msg.duration_ms } : undefined;
  if (!wf) {
    if (!msg.workflow) throw new InvalidError('the first message of a workflow must carry workflow {id, type, owner_id, owner_type}');
    const row: WorkflowFields = {
      // Ids are the org's own: another org's workflow of the same id is a different workflow, stored
      // under an id of its own, and this org learns nothing of it.
      workflow_id: found.idTaken ? newId('wf') : workflowId,
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
    };
    if (msg.kind === 'workflow') {
      // the common first message (a workflow `started`): the row is inserted in the state it leads
      // to, in one write; a new workflow has no steps yet
      const r = facts.insertWorkflowWithEvent(t, row, workflowMessageEvent(msg, []), extra);
      return r.changed ? 'accepted' : 'ignored';
    }
    wf = insertWorkflow(db, row);
  }
  if (msg.kind === 'workflow') {
    const stepStatuses = msg.transition === 'started' ? [] : listSteps(db, wf.workflow_id).map((s) => s.status);
    if (facts.workflowEvent(t, wf, workflowMessageEvent(msg, stepStatuses), extra)) return 'accepted';
    return wf.status === msg.transition ? 'duplicate' : 'ignored';
  }
  const s = msg.step!;
  const ev: StepEvent =
    msg.transition === 'started'
      ? { type: 'start' }
      : msg.transition === 'succeeded'
        ? { type: 'succeed' }
        : msg.transition === 'failed'
          ? { type: 'fail', error: msg.error || 'failed' }
          : { type: 'cancel' };
  const step = getStep(db, wf.workflow_id, s.id);
  if (!step) {
    // a new step is inserted in the state its first message leads to, in one write
    const row: StepRow = {
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
    };
    return facts.insertStepWithEvent(t, wf, row, ev, extra) ? 'accepted' : 'ignored';
  }
  if (facts.stepEvent(t, wf, step, ev, extra)) return 'accepted';
  return step.status === msg.transition ? 'duplicate' : 'ignored';
}

/** The workflow machine's event for a producer's workflow message (stepStatuses: for a finish). */
function workflowMessageEvent(msg: WorkflowMessage, stepStatuses: StepStatus[]): WorkflowEvent {
  return msg.transition === 'started' ? { type: 'start' } : { type: 'finish', outcome: msg.transition, error: msg.error, stepStatuses };
}
