// The step kinds the engine runs, each by one handler (src/engine/steps/<kind>.ts): a job for a
// runner, an approval, child workflows, a run's group deploy under its rollout policy, a health
// gate's bake, a verification gate, and a wait for a change window. The run
// (src/engine/workflow-runs.ts) begins a step and tells it of its ended children through the
// handler of its kind, never by an if-chain.
import { z } from 'zod';
import type { StepRow, WorkflowRow } from '../../../store/workflows.ts';
import type { DefinedStepKind } from '../definitions.ts';
import type { Tx } from '../transaction.ts';

/**
 * What runs a step: the kinds a definition names (definitions.ts), a group deploy (a `children`
 * step of a run's group, not a rollback) and a wait for a change window (added by a group deploy).
 */
export type StepKind = DefinedStepKind | 'group-deploy' | 'window';

export interface StepHandler {
  /** Begin a pending step of this kind. Returns true when it ended at once (the run goes on), false while it waits. */
  begin(t: Tx, wf: WorkflowRow, step: StepRow): boolean;
  /** A child workflow of a started step of this kind ended. Returns whether the step ended. */
  childEnded(t: Tx, wf: WorkflowRow, step: StepRow): boolean;
}

/** One handler per step kind (no default: a kind without a handler does not compile). */
export type StepHandlers = Record<StepKind, StepHandler>;

/** A step's kind as stored (`params.kind`); a step stored without a known kind runs as a job, as it always has. */
const storedKindSchema = z.object({
  kind: z.enum(['job', 'approval', 'children', 'bake', 'verify', 'window'] satisfies Array<DefinedStepKind | 'window'>).catch('job'),
});

/** A run's group deploy: a children step of a branch run or an app rollback that is not a rollback. */
export const isGroupDeploy = (step: StepRow): boolean =>
  step.params.kind === 'children' && !step.params.rollback && typeof step.params.group === 'string';

/** The kind of a step, as its params say. */
export function stepKindOf(step: StepRow): StepKind {
  return isGroupDeploy(step) ? 'group-deploy' : storedKindSchema.parse(step.params).kind;
}
