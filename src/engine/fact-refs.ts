// Building facts from stored rows: the one place that knows which entities an event is about.
import type { Db } from '../../store/db.ts';
import { getActionById } from '../../store/installs.ts';
import { publicWorkflowId, type StepRow, type WorkflowFields } from '../../store/workflows.ts';
import type { FactScope, RunResult, StepRef, WorkflowRef } from '../domain/facts.ts';
import type { LifecycleTransition } from '../domain/status.ts';

export function workflowRef(wf: WorkflowFields): WorkflowRef {
  const ref: WorkflowRef = { id: publicWorkflowId(wf), type: wf.type, owner_id: wf.owner_id, owner_type: wf.owner_type };
  if (wf.parent) ref.parent = wf.parent;
  return ref;
}

export function stepRef(s: StepRow): StepRef {
  const ref: StepRef = { id: s.step_id, name: s.name, idx: s.idx, execution_type: s.execution_type };
  if (s.target_type) ref.target_type = s.target_type;
  if (s.target_id) ref.target_id = s.target_id;
  if (s.component_id) ref.component_id = s.component_id;
  if (s.sandbox_id) ref.sandbox_id = s.sandbox_id;
  return ref;
}

/** The install, component, sandbox and action a workflow (step) event concerns. */
export function scopeOf(db: Db, wf: WorkflowFields, step?: StepRow): FactScope {
  const scope: FactScope = {};
  if (wf.owner_type === 'installs') scope.install_id = wf.owner_id;
  if (step?.component_id) scope.component_id = step.component_id;
  if (step?.sandbox_id) scope.sandbox_id = step.sandbox_id;
  const actionId = wf.action_id ?? (step?.params?.action_id as string | undefined);
  if (actionId) {
    const a = getActionById(db, actionId);
    scope.action = { id: actionId, name: a?.name ?? actionId };
  }
  return scope;
}

/** The milliseconds from `startedAt` to `endIso` (0 when it never started, never below 0). */
export function elapsedMs(startedAt: string | null, endIso: string): number {
  if (!startedAt) return 0;
  return Math.max(0, Date.parse(endIso) - Date.parse(startedAt));
}

/** `{outcome}` for a terminal lifecycle transition (error only on failed), `{}` for started (no duration computed for it). */
export function lifecycleOutcome(transition: LifecycleTransition, duration_ms: () => number, error: string): { outcome?: RunResult } {
  if (transition === 'started') return {};
  return { outcome: { status: transition, duration_ms: duration_ms(), ...(transition === 'failed' ? { error } : {}) } };
}
