// Children steps (CONTRACT 4.2): a step that starts child workflows (which ones is the engine's
// business: config-apply) and ends once they all ended, failed when any did not succeed. A run's
// group deploy is a children step too, run by its own handler (./group-deploy.ts).
import { getStep, listChildWorkflows, type StepRow, type WorkflowRow } from '../../../store/workflows.ts';
import type { Db } from '../../../store/db.ts';
import { isFinal } from '../../domain/status.ts';
import type { WorkflowFacts } from '../workflow-facts.ts';
import type { Tx } from '../transaction.ts';
import type { StepHandler } from './handlers.ts';

/**
 * A step of kind `children` starts child workflows; which ones is the engine's business
 * (config-apply). Returns why it started none when it refuses (the step fails with that error).
 */
export type StartChildren = (t: Tx, wf: WorkflowRow, step: StepRow, only?: string[]) => string | void;

export class ChildrenSteps implements StepHandler {
  constructor(
    private readonly db: Db,
    private readonly facts: WorkflowFacts,
    private readonly startChildren: StartChildren,
    /** children steps whose child workflows are being started right now: a child ending meanwhile does not settle them */
    private readonly spawning: Set<string>,
  ) {}

  /** Start the step's child workflows; it ends here if they all ended (or were refused). */
  begin(t: Tx, wf: WorkflowRow, step: StepRow): boolean {
    this.facts.stepEvent(t, wf, step, { type: 'start' });
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
    return this.childEnded(t, wf, getStep(this.db, wf.workflow_id, step.step_id)!);
  }

  /** End a started children step whose child workflows have all ended (none = succeeded). Returns whether it ended. */
  childEnded(t: Tx, wf: WorkflowRow, step: StepRow): boolean {
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
