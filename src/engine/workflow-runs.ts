// Workflow runs (CONTRACT 4.2): a workflow is created with its steps and run forward step by step
// until it waits for something (a runner's job, an approval, child workflows, a gate) or ends. Each
// step is begun by the handler of its kind (src/engine/steps/handlers.ts), which tells the run
// what next through RunControl (src/engine/steps/run-control.ts), the one port this class
// implements. Status changes go through WorkflowFacts.
import { setProvisioned } from '../../store/installs.ts';
import {
  cancelWorkflowJobs,
  getStep,
  getWorkflow,
  insertStep,
  listSteps,
  setVersionStatusForWorkflow,
  type StepRow,
  type WorkflowRow,
} from '../../store/workflows.ts';
import type { Db } from '../../store/db.ts';
import type { ParentRef } from '../domain/facts.ts';
import { isFinal, type RunOutcome, type OwnerType } from '../domain/status.ts';
import { newId } from '../domain/ids.ts';
import type { StepDef } from './definitions.ts';
import { ApprovalsAndCancel } from './steps/approval.ts';
import { HealthGates } from './steps/bake.ts';
import { ChildrenSteps, type StartChildren } from './steps/children.ts';
import { DeployBatches } from './steps/group-deploy.ts';
import { JobSteps } from './steps/job.ts';
import { stepKindOf, type StepHandlers } from './steps/handlers.ts';
import { VerifySteps } from './steps/verify.ts';
import { WindowWaits } from './steps/window.ts';
import type { WorkflowFacts } from './workflow-facts.ts';
import type { Tx } from './transaction.ts';
import type { Wakeups } from './wakeups.ts';
import type { RunControl } from './steps/run-control.ts';

export type { StartChildren };

export interface StartWorkflow {
  org_id: string;
  type: string;
  owner_id: string;
  owner_type: OwnerType;
  parent?: ParentRef | null;
  action_id?: string | null;
  params?: Record<string, unknown>;
  steps: StepDef[];
}

const TARGET_PREFIX: Record<string, string> = {
  install_deploys: 'dep',
  install_sandbox_runs: 'sbr',
  install_action_workflow_runs: 'awr',
  install_stack_versions: 'stv',
};

/** The registry: the handler of every step kind (StepHandlers), each by its own type for the engine's calls beyond begin. */
export interface StepRegistry extends StepHandlers {
  job: JobSteps;
  approval: ApprovalsAndCancel;
  children: ChildrenSteps;
  'group-deploy': DeployBatches;
  bake: HealthGates;
  verify: VerifySteps;
  window: WindowWaits;
}

export class WorkflowRuns implements RunControl {
  /** children steps whose child workflows are being started right now (a child ending meanwhile does not settle them) */
  private readonly spawning = new Set<string>();
  /** the handler of each step kind */
  readonly steps: StepRegistry;

  constructor(
    private readonly db: Db,
    private readonly facts: WorkflowFacts,
    startChildren: StartChildren,
    wakeups: Wakeups,
  ) {
    const window = new WindowWaits(db, facts, wakeups);
    this.steps = {
      job: new JobSteps(db, facts),
      approval: new ApprovalsAndCancel(db, facts, this, wakeups),
      children: new ChildrenSteps(db, facts, startChildren, this.spawning),
      'group-deploy': new DeployBatches(db, facts, this, startChildren, this.spawning, window),
      bake: new HealthGates(db, facts, this, wakeups),
      verify: new VerifySteps(db, facts, this, wakeups),
      window,
    };
  }

  /** Create a workflow and its steps, emit `started`, and run its first step. */
  start(t: Tx, spec: StartWorkflow): WorkflowRow {
    const id = newId('wf');
    // stored started (one INSERT, its `started` emitted), then its steps
    this.facts.insertWorkflowWithEvent(
      t,
      {
        workflow_id: id,
        org_id: spec.org_id,
        type: spec.type,
        owner_id: spec.owner_id,
        owner_type: spec.owner_type,
        parent: spec.parent ?? null,
        action_id: spec.action_id ?? null,
        external: false,
        external_id: null,
        status: 'pending',
        error: null,
        params: spec.params ?? {},
        started_at: null,
        finished_at: null,
      },
      { type: 'start' },
    );
    this.addSteps(spec.org_id, id, spec.steps, 0);
    this.advance(t, id);
    return getWorkflow(this.db, id)!;
  }

  /** Store steps, pending, from `firstIdx` on. */
  addSteps(orgId: string, workflowId: string, defs: StepDef[], firstIdx: number): void {
    defs.forEach((d, i) => {
      insertStep(this.db, {
        step_id: newId('st'),
        workflow_id: workflowId,
        org_id: orgId,
        idx: firstIdx + i,
        name: d.name,
        target_type: d.target_type,
        target_id: d.target_id ?? (d.target_type ? newId(TARGET_PREFIX[d.target_type] ?? 'tgt') : null),
        component_id: d.component_id ?? null,
        sandbox_id: d.sandbox_id ?? null,
        execution_type: d.execution_type,
        operation: d.operation ?? null,
        status: 'pending',
        error: null,
        plan: null,
        approval: null,
        params: { ...(d.params ?? {}), kind: d.kind, runner: d.runner ?? null, action_id: d.action_id ?? null },
        started_at: null,
        finished_at: null,
      });
    });
  }

  /** Run the workflow forward until it waits for something (a job, an approval, children) or ends. */
  advance(t: Tx, workflowId: string): void {
    for (let guard = 0; guard < 10_000; guard++) {
      const wf = getWorkflow(this.db, workflowId);
      if (!wf || isFinal(wf.status)) return;
      const steps = listSteps(this.db, workflowId);
      if (steps.some((s) => s.status === 'started' || s.status === 'awaiting_approval')) return;
      const failed = steps.find((s) => s.status === 'failed');
      if (failed) {
        // a failed run ends; the rollback steps its health gate added run first (CONTRACT 4.3)
        for (const s of steps) if (s.status === 'pending' && !s.params.rollback) this.facts.stepEvent(t, wf, s, { type: 'cancel' });
        const rollback = steps.find((s) => s.status === 'pending' && s.params.rollback);
        if (rollback) {
          if (!this.runStep(t, wf, rollback)) return;
          continue;
        }
        this.finish(t, wf, 'failed', failed.error ?? `step ${failed.name} failed`);
        return;
      }
      const next = steps.find((s) => s.status === 'pending');
      if (!next) {
        this.finish(t, wf, steps.some((s) => s.status === 'cancelled') ? 'cancelled' : 'succeeded');
        return;
      }
      if (!this.runStep(t, wf, next)) return;
    }
  }

  /** End a workflow with an outcome: its jobs cancelled, its version's status, an install's provisioned flag, its parent step told. */
  finish(t: Tx, wf: WorkflowRow, outcome: RunOutcome, error?: string): void {
    const stepStatuses = listSteps(this.db, wf.workflow_id).map((s) => s.status);
    if (!this.facts.workflowEvent(t, wf, { type: 'finish', outcome, error, stepStatuses })) return;
    cancelWorkflowJobs(this.db, wf.workflow_id);
    setVersionStatusForWorkflow(this.db, wf.workflow_id, outcome);
    if (outcome === 'succeeded' && wf.owner_type === 'installs') {
      if (wf.type === 'provision' || wf.type === 'reprovision') setProvisioned(this.db, wf.owner_id, true);
      if (wf.type === 'deprovision') setProvisioned(this.db, wf.owner_id, false);
    }
    if (wf.parent) this.childFinished(t, wf.parent);
  }

  /** Begin one step, by the handler of its kind. Returns true when the step finished at once and the loop should go on. */
  private runStep(t: Tx, wf: WorkflowRow, step: StepRow): boolean {
    const kind = stepKindOf(step);
    if (step.execution_type === 'skipped' || (step.execution_type === 'hidden' && step.params.kind !== 'job')) {
      this.facts.stepEvent(t, wf, step, { type: 'skip' });
      return true;
    }
    return this.steps[kind].begin(t, wf, step);
  }

  private childFinished(t: Tx, parent: ParentRef): void {
    if (this.spawning.has(parent.step_id)) return; // the step's handler settles it once every child is started
    const wf = getWorkflow(this.db, parent.workflow_id);
    const step = wf && getStep(this.db, parent.workflow_id, parent.step_id);
    if (!wf || !step) return;
    if (this.steps[stepKindOf(step)].childEnded(t, wf, step)) this.advance(t, wf.workflow_id);
  }
}
