// How a step's handler tells its run what next: the one port between the step kinds
// (src/engine/steps/) and the run that steps through them (src/engine/workflow-runs.ts).
//
// - wait: a handler's `begin` returns false (the run stops until the step ends);
// - go on: `begin` returns true when the step ended at once; a step that ends later (a runner's
//   report, an answer, a verdict, the clock, a child workflow) is ended by its handler, which then
//   calls `advance`;
// - fail: the handler fails its step (WorkflowFacts `fail`) and the run, going on, ends failed
//   after the rollback steps the handler added with `addSteps`; `finish` ends a run at once (cancel).
import type { WorkflowRow } from '../../../store/workflows.ts';
import type { RunOutcome } from '../../domain/status.ts';
import type { StepDef } from '../definitions.ts';
import type { Tx } from '../transaction.ts';

export interface RunControl {
  /** Run the workflow forward until it waits for something (a job, an approval, children, a gate) or ends. */
  advance(t: Tx, workflowId: string): void;
  /** End a workflow with an outcome: its jobs cancelled, its version's status, its parent step told. */
  finish(t: Tx, wf: WorkflowRow, outcome: RunOutcome, error?: string): void;
  /** Store steps, pending, from `firstIdx` on (the rollback steps of a failed group, after the run's last step). */
  addSteps(orgId: string, workflowId: string, defs: StepDef[], firstIdx: number): void;
}
