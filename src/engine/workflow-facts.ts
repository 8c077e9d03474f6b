// Emitting (CONTRACT 4.2, 5): every change of a workflow or step goes through its pure machine
// (machines/), which says whether it is legal and which facts it emits; the new state is stored
// and the facts are emitted in the caller's transaction (Tx). The one place a workflow's or a
// step's status is written.
import {
  insertStep,
  insertWorkflow,
  updateStep,
  updateWorkflowStatus,
  type StepRow,
  type WorkflowFields,
  type WorkflowRow,
} from '../../store/workflows.ts';
import type { Db } from '../../store/db.ts';
import { advanceStep, type StepEvent } from '../../machines/step.ts';
import { advanceWorkflow, type WorkflowEvent } from '../../machines/workflow.ts';
import { batchSnapshotOf } from '../../machines/deploy-batch.ts';
import { isFinal, type WorkflowStatus } from '../domain/status.ts';
import type { ApprovalFact } from '../domain/facts.ts';
import { rolloutSchema, type Rollout } from '../domain/rollout.ts';
import { elapsedMs, lifecycleOutcome, scopeOf, stepRef, workflowRef } from './fact-refs.ts';
import type { Tx } from './transaction.ts';

/** What an event's facts may be told beyond the machine's answer: the duration a producer measured. */
export interface FactExtra {
  duration_ms?: number;
}

/** The run's rollout record once a group of it failed (CONTRACT 4.3 `data.rollout`). */
const rolloutOf = (wf: WorkflowFields): { rollout?: Rollout } =>
  wf.params.rollout ? { rollout: rolloutSchema.parse(wf.params.rollout) } : {};

/** A step's: the run's record, else (a group deploy within its failure budget) the installs that failed. */
function stepRolloutOf(wf: WorkflowRow, step: StepRow): { rollout?: Rollout } {
  const run = rolloutOf(wf);
  // a change window's wait step: exactly the install, its next window and the windows holding it (CONTRACT 4.3)
  if (step.params.kind === 'window') return { rollout: { ...(step.params.window as object) } as Rollout };
  if (run.rollout) return run;
  const failed = batchSnapshotOf(step.params)?.context.failed ?? [];
  return failed.length ? { rollout: { run_id: wf.workflow_id, failed_installs: failed } } : {};
}

/** The fields given a value (an update leaves the others as they are). */
function definedOnly<T extends object>(fields: T): Partial<T> {
  return Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined)) as Partial<T>;
}

export class WorkflowFacts {
  constructor(private readonly db: Db) {}

  /** Apply an event to a step through the step machine; persist; emit its facts. Returns whether it changed anything. */
  stepEvent(t: Tx, wf: WorkflowRow, step: StepRow, ev: StepEvent, extra?: FactExtra): boolean {
    return this.stepEventRow(t, wf, step, ev, extra) !== null;
  }

  /**
   * A step not stored yet, stored in the state its first event leads to (one INSERT, not an
   * INSERT and an UPDATE of the same row), and that event's facts emitted. Returns whether the
   * event changed anything (when not, the step is stored as given).
   */
  insertStepWithEvent(t: Tx, wf: WorkflowRow, step: StepRow, ev: StepEvent, extra?: FactExtra): boolean {
    const changed =
      this.stepEventRow(t, wf, step, ev, extra, (fields) => insertStep(this.db, { ...step, ...definedOnly(fields) })) !== null;
    if (!changed) insertStep(this.db, step);
    return changed;
  }

  /** stepEvent, returning the step as updated (null when nothing changed); `write` stores the changed fields (an UPDATE by default). */
  stepEventRow(
    t: Tx,
    wf: WorkflowRow,
    step: StepRow,
    ev: StepEvent,
    extra?: FactExtra,
    write: (fields: Partial<StepRow>) => StepRow = (fields) =>
      updateStep(this.db, { workflow_id: step.workflow_id, step_id: step.step_id, ...fields })!,
  ): StepRow | null {
    const silent = step.execution_type === 'hidden' || step.execution_type === 'skipped';
    const r = advanceStep(step.status, { silent }, ev);
    if (!r.changed) return null;
    const now = t.now;
    const status = r.state;
    const startedAt = step.started_at ?? (status !== 'pending' && status !== 'cancelled' && status !== 'skipped' ? now : null);
    const error =
      ev.type === 'fail'
        ? (ev.error ?? 'failed')
        : ev.type === 'reject'
          ? (ev.error ?? 'approval rejected')
          : ev.type === 'expire'
            ? 'approval_expired'
            : null;
    const fresh = write({
      status,
      started_at: startedAt ?? undefined,
      finished_at: isFinal(status) && status !== 'skipped' ? now : undefined,
      error: error ?? undefined,
    });
    // what every fact of this step says after its kind and transition
    const about = { org_id: wf.org_id, time: now, workflow: workflowRef(wf), step: stepRef(fresh), ...scopeOf(this.db, wf, fresh) };
    for (const f of r.emitted) {
      if (f.type === 'lifecycle') {
        t.emit({
          kind: 'workflow_step',
          transition: f.transition,
          ...about,
          ...lifecycleOutcome(f.transition, () => extra?.duration_ms ?? elapsedMs(startedAt, now), error ?? f.error ?? 'failed'),
          ...stepRolloutOf(wf, fresh),
        });
      } else {
        const a = fresh.approval ?? { status: f.transition };
        t.emit({
          kind: 'workflow_step_approval',
          transition: f.transition,
          ...about,
          approval: { ...(a as ApprovalFact['approval']), status: f.transition },
        });
      }
    }
    return fresh;
  }

  /** An approval step's response counted by its policy (CONTRACT 10.4 `response_recorded`): an event, no change of status. */
  responseRecorded(t: Tx, wf: WorkflowRow, step: StepRow, approval: ApprovalFact['approval']): void {
    t.emit({
      kind: 'workflow_step_approval',
      transition: 'response_recorded',
      org_id: wf.org_id,
      time: t.now,
      workflow: workflowRef(wf),
      step: stepRef(step),
      ...scopeOf(this.db, wf, step),
      approval,
    });
  }

  /** Apply an event to a workflow through the workflow machine; persist; emit. */
  workflowEvent(t: Tx, wf: WorkflowRow, ev: WorkflowEvent, extra?: FactExtra): boolean {
    return (
      this.applyWorkflowEvent(t, wf, ev, extra, (status, fields) => updateWorkflowStatus(this.db, wf.workflow_id, status, fields)) !== null
    );
  }

  /**
   * A workflow not stored yet, stored in the state its first event leads to (one INSERT, not an
   * INSERT and an UPDATE of the same row), and that event's facts emitted. Returns the row as
   * stored and whether the event changed anything (when not, the row is stored as given).
   */
  insertWorkflowWithEvent(t: Tx, wf: WorkflowFields, ev: WorkflowEvent, extra?: FactExtra): { workflow: WorkflowRow; changed: boolean } {
    const stored: { row?: WorkflowRow } = {};
    const changed =
      this.applyWorkflowEvent(t, wf, ev, extra, (status, fields) => {
        stored.row = insertWorkflow(this.db, wf, {
          status,
          error: fields.error ?? wf.error,
          started_at: fields.started_at,
          finished_at: fields.finished_at ?? wf.finished_at,
        });
      }) !== null;
    return { workflow: stored.row ?? insertWorkflow(this.db, wf), changed };
  }

  /** The machine's step for a workflow event; `write` persists the new state; then the facts. Null when nothing changed. */
  private applyWorkflowEvent(
    t: Tx,
    wf: WorkflowFields,
    ev: WorkflowEvent,
    extra: FactExtra | undefined,
    write: (status: WorkflowStatus, fields: { error: string | null; started_at: string; finished_at: string | undefined }) => void,
  ): WorkflowStatus | null {
    const r = advanceWorkflow(wf.status, {}, ev);
    if (!r.changed) return null;
    const now = t.now;
    const startedAt = wf.started_at ?? now;
    const error = ev.type === 'finish' && ev.outcome === 'failed' ? (ev.error ?? 'workflow failed') : null;
    write(r.state, { started_at: startedAt, finished_at: isFinal(r.state) ? now : undefined, error });
    const scope = scopeOf(this.db, wf);
    for (const f of r.emitted) {
      t.emit({
        kind: 'workflow',
        transition: f.transition,
        org_id: wf.org_id,
        time: now,
        workflow: workflowRef(wf),
        ...scope,
        ...lifecycleOutcome(f.transition, () => extra?.duration_ms ?? elapsedMs(startedAt, now), error ?? 'workflow failed'),
        ...rolloutOf(wf),
      });
    }
    return r.state;
  }
}
