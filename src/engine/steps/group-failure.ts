// What a group's steps share (a deploy over its failure budget, a verification that failed, a bake
// whose gate tripped): failing the run's group the same way, and, for the two gates (bake, verify),
// what their handlers are built with.
import { listSteps, setWorkflowParams, type StepRow, type WorkflowRow } from '../../../store/workflows.ts';
import type { Db } from '../../../store/db.ts';
import { onFailureOf, type Rollout } from '../../domain/rollout.ts';
import { rollbackSteps } from '../rollout-plans.ts';
import type { WorkflowFacts } from '../workflow-facts.ts';
import type { Tx } from '../transaction.ts';
import type { Wakeups } from '../wakeups.ts';
import type { RunControl } from './run-control.ts';

/** What failing a group touches: the store, the step's facts, the run. */
export interface GroupFailureDeps {
  db: Db;
  facts: WorkflowFacts;
  run: RunControl;
}

/**
 * A group failed its run: the run records why (`rollout`; its events carry it from now on), the
 * step fails with `error`, the later steps still pending are cancelled (`cancelPending`) and, to
 * roll back (`on_failure`), every group deployed gets a rollback step, newest first, after the
 * run's last step. Returns the run as it is now.
 */
export function failGroup(
  d: GroupFailureDeps,
  t: Tx,
  wf: WorkflowRow,
  step: StepRow,
  failure: { rollout: Rollout; error: string; cancelPending: boolean },
): WorkflowRow {
  const run = setWorkflowParams(d.db, wf.workflow_id, { ...wf.params, rollout: failure.rollout })!;
  d.facts.stepEvent(t, run, step, { type: 'fail', error: failure.error });
  const steps = listSteps(d.db, run.workflow_id);
  if (failure.cancelPending) for (const s of steps) if (s.status === 'pending') d.facts.stepEvent(t, run, s, { type: 'cancel' });
  if (onFailureOf(run.params) === 'rollback')
    d.run.addSteps(run.org_id, run.workflow_id, rollbackSteps(steps), Math.max(...steps.map((s) => s.idx)) + 1);
  return run;
}

/** A gate's handler (bake, verify): built with the store, the step's facts, the run and the engine's wake-ups. */
export abstract class GroupGate {
  constructor(
    protected readonly db: Db,
    protected readonly facts: WorkflowFacts,
    protected readonly run: RunControl,
    protected readonly wakeups: Wakeups,
  ) {}

  /** The gate failed the group (failGroup): later groups are cancelled. */
  protected failGroup(t: Tx, wf: WorkflowRow, step: StepRow, rollout: Rollout, error: string): WorkflowRow {
    return failGroup({ db: this.db, facts: this.facts, run: this.run }, t, wf, step, { rollout, error, cancelPending: true });
  }
}
