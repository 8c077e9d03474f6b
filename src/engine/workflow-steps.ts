// Steps and jobs (CONTRACT 4.2, 5.2): a workflow is created with its steps and run forward step by
// step until it waits for something (a runner's job, an approval, child workflows, a bake) or
// ends; a job step queues a job for the install's (or the org's) runner. Status changes go through
// WorkflowFacts; bakes through HealthGates.
import { getActionById, getInstallById, setProvisioned } from '../../store/installs.ts';
import { orgRunner } from '../../store/runners.ts';
import {
  cancelWorkflowJobs,
  getStep,
  getWorkflow,
  insertJob,
  insertStep,
  listChildWorkflows,
  listSteps,
  setVersionStatusForWorkflow,
  updateStep,
  type StepRow,
  type WorkflowRow,
} from '../../store/workflows.ts';
import type { Db } from '../../store/db.ts';
import type { ParentRef } from '../domain/facts.ts';
import { isFinal, type RunOutcome, type OwnerType } from '../domain/status.ts';
import { newId } from '../domain/ids.ts';
import type { StepDef } from './definitions.ts';
import { HealthGates } from './steps/bake.ts';
import { DeployBatches, isGroupDeploy } from './steps/group-deploy.ts';
import { VerifySteps } from './steps/verify.ts';
import { WindowWaits } from './steps/window.ts';
import { groupPlan } from './rollout-plans.ts';
import type { WorkflowFacts } from './workflow-facts.ts';
import type { Tx } from './transaction.ts';

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

/**
 * A step of kind `children` starts child workflows; which ones is the engine's business
 * (config-apply). Returns why it started none when it refuses (the step fails with that error).
 */
export type StartChildren = (t: Tx, wf: WorkflowRow, step: StepRow, only?: string[]) => string | void;

const TARGET_PREFIX: Record<string, string> = {
  install_deploys: 'dep',
  install_sandbox_runs: 'sbr',
  install_action_workflow_runs: 'awr',
  install_stack_versions: 'stv',
};

export class WorkflowSteps {
  /** children steps whose child workflows are being started right now (see startChildSteps) */
  private readonly spawning = new Set<string>();
  readonly gates: HealthGates;
  readonly batches: DeployBatches;
  readonly verifications: VerifySteps;

  constructor(
    private readonly db: Db,
    private readonly facts: WorkflowFacts,
    private readonly startChildren: StartChildren,
    wakeBakes?: (at: number) => void,
    wakeVerify?: (workflowId: string, stepId: string, at: number) => void,
    wakeWindows?: (at: number) => void,
  ) {
    this.gates = new HealthGates(db, facts, this, wakeBakes);
    this.verifications = new VerifySteps(db, facts, this, wakeVerify);
    const windows = new WindowWaits(db, facts, wakeWindows);
    this.batches = new DeployBatches(db, facts, this, (t, wf, step, ids) => this.startChildren(t, wf, step, ids), this.spawning, windows);
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

  /** Begin one step. Returns true when the step finished at once and the loop should go on. */
  private runStep(t: Tx, wf: WorkflowRow, step: StepRow): boolean {
    const kind = step.params.kind as string;
    if (step.execution_type === 'skipped' || (step.execution_type === 'hidden' && kind !== 'job')) {
      this.facts.stepEvent(t, wf, step, { type: 'skip' });
      return true;
    }
    if (kind === 'bake') return this.gates.startBake(t, wf, step);
    if (kind === 'verify') return this.verifications.begin(t, wf, step);
    if (kind === 'approval') {
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
    if (kind === 'children') return this.startChildSteps(t, wf, step);
    // a job for a runner
    const missing = this.missingActionInput(wf, step);
    if (missing) {
      this.facts.stepEvent(t, wf, step, { type: 'fail', error: `missing required input: ${missing}` });
      return true;
    }
    if (step.params.job_id) return false; // already sent, waiting for the runner
    this.queueJob(t, wf, step);
    return false;
  }

  /** A children step: start its child workflows; it ends here if they all ended (or were refused). */
  private startChildSteps(t: Tx, wf: WorkflowRow, step: StepRow): boolean {
    this.facts.stepEvent(t, wf, step, { type: 'start' });
    // a run's group deploy starts its installs as its rollout policy says (max_parallel, budget)
    if (isGroupDeploy(step)) return this.batches.begin(t, wf, getStep(this.db, wf.workflow_id, step.step_id)!);
    // A child with nothing to do ends while the children are being started; it must not end this
    // step while later children are still to be started. The step ends here if all of them ended.
    this.spawning.add(step.step_id);
    let refused: string | void;
    try {
      refused = this.startChildren(t, wf, step);
    } finally {
      this.spawning.delete(step.step_id);
    }
    if (refused) {
      this.facts.stepEvent(t, wf, getStep(this.db, wf.workflow_id, step.step_id)!, { type: 'fail', error: refused });
      return true;
    }
    return this.settleChildren(t, wf, getStep(this.db, wf.workflow_id, step.step_id)!);
  }

  private missingActionInput(wf: WorkflowRow, step: StepRow): string | null {
    if (step.operation !== 'action.run' || !wf.action_id) return null;
    const action = getActionById(this.db, wf.action_id);
    const given = (wf.params.inputs as Record<string, unknown> | undefined) ?? {};
    for (const [name, spec] of Object.entries(action?.inputs ?? {})) {
      if (spec?.required && (given[name] === undefined || given[name] === null)) return name;
    }
    return null;
  }

  private queueJob(t: Tx, wf: WorkflowRow, step: StepRow): void {
    const install = wf.owner_type === 'installs' ? getInstallById(this.db, wf.owner_id) : undefined;
    const runnerId = step.params.runner === 'org' || !install ? orgRunner(this.db, wf.org_id)?.runner_id : install.runner_id;
    if (!runnerId) {
      this.facts.stepEvent(t, wf, step, { type: 'fail', error: 'no runner for this step' });
      return;
    }
    const jobId = newId('job');
    const payload: Record<string, unknown> = {
      job_id: jobId,
      org_id: wf.org_id,
      runner_id: runnerId,
      install_id: install?.install_id ?? null,
      workflow_id: wf.workflow_id,
      step_id: step.step_id,
      operation: step.operation,
      plan_only: step.operation === 'component.plan' || step.operation === 'sandbox.plan',
    };
    if (step.component_id) payload.component_id = step.component_id;
    if (step.sandbox_id) payload.sandbox_id = step.sandbox_id;
    if (step.params.action_id) payload.action_id = step.params.action_id;
    const cfg = (wf.params.app_config_id as string | undefined) ?? install?.app_config_id;
    if (cfg) payload.app_config_id = cfg;
    insertJob(this.db, {
      job_id: jobId,
      org_id: wf.org_id,
      runner_id: runnerId,
      workflow_id: wf.workflow_id,
      step_id: step.step_id,
      payload,
      status: 'queued',
    });
    updateStep(this.db, { workflow_id: wf.workflow_id, step_id: step.step_id, params: { ...step.params, job_id: jobId } });
    t.jobsChanged();
  }

  private childFinished(t: Tx, parent: ParentRef): void {
    if (this.spawning.has(parent.step_id)) return; // startChildSteps settles the step once every child is started
    const wf = getWorkflow(this.db, parent.workflow_id);
    const step = wf && getStep(this.db, parent.workflow_id, parent.step_id);
    if (!wf || !step) return;
    const ended = isGroupDeploy(step) ? this.batches.childEnded(t, wf, step) : this.settleChildren(t, wf, step);
    if (ended) this.advance(t, wf.workflow_id);
  }

  /** End a started children step whose child workflows have all ended (none = succeeded). Returns whether it ended. */
  private settleChildren(t: Tx, wf: WorkflowRow, step: StepRow): boolean {
    if (step.status !== 'started') return false;
    const children = listChildWorkflows(this.db, wf.workflow_id, step.step_id);
    if (children.some((c) => !isFinal(c.status))) return false;
    const bad = children.filter((c) => c.status !== 'succeeded');
    if (bad.length)
      return this.facts.stepEvent(t, wf, step, {
        type: 'fail',
        error: `${bad.length} of ${children.length} installs did not apply the config`,
      });
    return this.facts.stepEvent(t, wf, step, { type: 'succeed' });
  }
}
