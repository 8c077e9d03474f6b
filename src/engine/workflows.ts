// Workflows the engine runs (CONTRACT 4.2, 4.3, 5): the one face of the engine's workflow parts,
// each of one job — emitting (workflow-facts.ts), steps and jobs (workflow-steps.ts), runner
// results and drift (runner-results.ts), approvals and cancel (steps/approval.ts), health gates
// (steps/bake.ts) and the rollout plans they use (rollout-plans.ts). Every change commits in
// the caller's transaction (Tx).
import type { StepRow, WorkflowFields, WorkflowRow } from '../../store/workflows.ts';
import type { Db } from '../../store/db.ts';
import type { StepEvent, WorkflowEvent } from '../../machines/index.ts';
import type { ApprovalsAndCancel } from './steps/approval.ts';
import { RunnerResults, type IngestResult, type JobReport } from './runner-results.ts';
import { WorkflowFacts, type FactExtra } from './workflow-facts.ts';
import { WorkflowSteps, type StartChildren, type StartWorkflow } from './workflow-steps.ts';
import type { Actor } from '../domain/scopes.ts';
import type { Tx } from './transaction.ts';
import type { VerifySteps } from './steps/verify.ts';

export type { IngestResult, JobReport, StartChildren, StartWorkflow };

export class Workflows {
  private readonly facts: WorkflowFacts;
  private readonly steps: WorkflowSteps;
  private readonly results: RunnerResults;
  private readonly answers: ApprovalsAndCancel;

  /** `wakeBakes(at)`: run the bakes' tick at `at` (engine clock, ms), when a gate's verdict will have lasted its `for` */
  constructor(
    db: Db,
    startChildren: StartChildren,
    wakeBakes?: (at: number) => void,
    wakeVerify?: (workflowId: string, stepId: string, at: number) => void,
    wakeWindows?: (at: number) => void,
  ) {
    this.facts = new WorkflowFacts(db);
    this.steps = new WorkflowSteps(db, this.facts, startChildren, wakeBakes, wakeVerify, wakeWindows);
    this.results = new RunnerResults(db, this.facts, this.steps);
    this.answers = this.steps.steps.approval;
  }

  /** Create a workflow and its steps, emit `started`, and run its first step. */
  start(t: Tx, spec: StartWorkflow): WorkflowRow {
    return this.steps.start(t, spec);
  }

  /** Run the workflow forward until it waits for something (a job, an approval, children) or ends. */
  advance(t: Tx, workflowId: string): void {
    this.steps.advance(t, workflowId);
  }

  stepEvent(t: Tx, wf: WorkflowRow, step: StepRow, ev: StepEvent, extra?: FactExtra): boolean {
    return this.facts.stepEvent(t, wf, step, ev, extra);
  }

  insertStepWithEvent(t: Tx, wf: WorkflowRow, step: StepRow, ev: StepEvent, extra?: FactExtra): boolean {
    return this.facts.insertStepWithEvent(t, wf, step, ev, extra);
  }

  workflowEvent(t: Tx, wf: WorkflowRow, ev: WorkflowEvent, extra?: FactExtra): boolean {
    return this.facts.workflowEvent(t, wf, ev, extra);
  }

  insertWorkflowWithEvent(t: Tx, wf: WorkflowFields, ev: WorkflowEvent, extra?: FactExtra): { workflow: WorkflowRow; changed: boolean } {
    return this.facts.insertWorkflowWithEvent(t, wf, ev, extra);
  }

  /** A runner's report on a job (CONTRACT 5.2). Throws NotFoundError for an unknown job. */
  jobReport(t: Tx, orgId: string, jobId: string, msg: JobReport): IngestResult {
    return this.results.jobReport(t, orgId, jobId, msg);
  }

  respondToApproval(
    t: Tx,
    orgId: string,
    workflowId: string,
    stepId: string,
    response: 'approved' | 'rejected',
    note: string | undefined,
    actor: Actor | null,
  ): StepRow {
    return this.answers.respondToApproval(t, orgId, workflowId, stepId, response, note, actor);
  }

  cancel(t: Tx, orgId: string, workflowId: string): WorkflowRow {
    return this.answers.cancel(t, orgId, workflowId);
  }

  /** A verdict changed an install's health: the bakes watching it see its composite verdict. */
  installHealthChanged(t: Tx, orgId: string, installId: string): void {
    this.steps.steps.bake.installHealthChanged(t, orgId, installId);
  }

  /** The engine's clock moved: bakes whose time is up pass. */
  bakeTick(t: Tx): void {
    this.steps.steps.bake.bakeTick(t);
  }

  /** Verification gates' steps (CONTRACT 4.3 `verification`): polled by the engine's Verifier. */
  get verifications(): VerifySteps {
    return this.steps.steps.verify;
  }

  /**
   * Change windows (CONTRACT 4.3): installs waiting for one are looked at again, those due on the
   * clock or, when an app's windows changed, every one of that app's; runs whose group deploy ended move on.
   */
  reviewWindowWaits(t: Tx, opts: { orgId?: string; appId?: string } = {}): void {
    for (const id of this.steps.steps['group-deploy'].reviewWaits(t, opts)) this.steps.advance(t, id);
  }
}
