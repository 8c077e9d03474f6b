// A run's group deploys under its rollout policy (CONTRACT 4.3 "Rollout policy"): a `deploy install
// group` step feeds its batch machine (machines/deploy-batch.ts) the outcomes of its installs'
// config updates and starts what it says (at most `max_parallel` at once, in the group's install
// order); the batch, typed, is kept in the step's params. Within the failure budget the step
// succeeds (its events list the installs that failed); over it, the step fails once the updates
// already running have ended, the run records why (`trigger: "deploy_failed"`) and, with
// `on_failure: "rollback"`, every group deployed and every install of this group whose update
// started go back to the configs they had before the run. Installs a change window holds wait
// (./window.ts); one waiting longer than `window_timeout` fails the group the same
// way, with `trigger: "window_timeout"` naming the installs.
import { getInstallById, type Install } from '../../../store/installs.ts';
import { getStep, getWorkflow, listChildWorkflows, updateStep, type StepRow, type WorkflowRow } from '../../../store/workflows.ts';
import type { Db } from '../../../store/db.ts';
import {
  advanceDeployBatch,
  batchSnapshotOf,
  failureBudget,
  initialDeployBatch,
  type BatchEmit,
  type BatchEvent,
  type BatchSnapshot,
} from '../../../machines/deploy-batch.ts';
import { isFinal } from '../../domain/status.ts';
import { rolloutParamsOf, type FailedInstall, type Rollout } from '../../domain/rollout.ts';
import type { WindowWaits } from './window.ts';
import { failGroup } from './group-failure.ts';
import type { StepHandler } from './handlers.ts';
import type { RunControl } from './run-control.ts';
import { groupStepOf } from './state.ts';
import type { WorkflowFacts } from '../workflow-facts.ts';
import type { Tx } from '../transaction.ts';

/**
 * Start the config updates of these installs of a deploy step (the group's `before` is recorded on
 * the first call); a message when refused.
 */
export type StartInstalls = (t: Tx, wf: WorkflowRow, step: StepRow, installIds: string[]) => string | void;

export class DeployBatches implements StepHandler {
  constructor(
    private readonly db: Db,
    private readonly facts: WorkflowFacts,
    private readonly run: RunControl,
    private readonly startInstalls: StartInstalls,
    /** a child workflow being started may end at once: the step is settled after, not during */
    private readonly spawning: Set<string>,
    private readonly windows: WindowWaits,
  ) {}

  /** Begin a group's deploy: the step starts, then its batch. Returns whether it ended at once. */
  begin(t: Tx, wf: WorkflowRow, pending: StepRow): boolean {
    this.facts.stepEvent(t, wf, pending, { type: 'start' });
    const step = getStep(this.db, wf.workflow_id, pending.step_id)!;
    const { policy } = rolloutParamsOf(wf.params);
    const order = installOrder(this.db, groupStepOf(step).install_ids);
    const from = initialDeployBatch({
      order,
      max_parallel: policy?.max_parallel ?? null,
      budget: failureBudget(order.length, policy?.max_failed_pct ?? 0),
    });
    return this.feed(t, wf, step, [{ type: 'begin' }], from);
  }

  /** A child of a deploy step ended: its batch hears it. Returns whether the step ended. */
  childEnded(t: Tx, wf: WorkflowRow, step: StepRow): boolean {
    if (step.status !== 'started' || !batchSnapshotOf(step.params)) return false;
    return this.feed(t, wf, step, []);
  }

  /** News from the step's waiting installs (released, timed out). Returns whether the step ended. */
  hear(t: Tx, wf: WorkflowRow, step: StepRow, events: BatchEvent[]): boolean {
    if (step.status !== 'started' || !batchSnapshotOf(step.params)) return false;
    return this.feed(t, wf, step, events);
  }

  /** The app's windows changed, or the clock reached a wait's moment: the waits are looked at again. Returns the runs to move on. */
  reviewWaits(t: Tx, opts: { orgId?: string; appId?: string } = {}): string[] {
    const ended: string[] = [];
    for (const n of this.windows.review(t, opts)) {
      const step = getStep(this.db, n.wf.workflow_id, n.step.step_id)!;
      if (this.hear(t, getWorkflow(this.db, n.wf.workflow_id)!, step, n.events)) ended.push(n.wf.workflow_id);
    }
    return ended;
  }

  /**
   * Feed the batch `events`, then the outcome of every child that has ended and that it has not
   * heard of (one may end while it is being started); start what it says, and do so again until it
   * says nothing new. Returns whether the step ended.
   */
  private feed(t: Tx, wf: WorkflowRow, step: StepRow, events: BatchEvent[], from?: BatchSnapshot): boolean {
    let batch = from ?? batchSnapshotOf(step.params);
    if (!batch) throw new Error(`deploy step ${step.step_id} has no batch`);
    const queue = [...events];
    const ends: Array<Exclude<BatchEmit, { type: 'start' }>> = [];
    for (let guard = 0; guard < 100_000; guard++) {
      if (!queue.length) queue.push(...this.unheard(wf, step, batch));
      const ev = queue.shift();
      if (!ev) break;
      const r = advanceDeployBatch(batch.state, batch.context, ev);
      if (!r.changed) continue;
      batch = { state: r.state, context: r.context };
      let current = updateStep(this.db, { workflow_id: step.workflow_id, step_id: step.step_id, params: { ...step.params, batch } })!;
      for (const e of r.emitted) {
        if (e.type !== 'start') {
          ends.push(e);
          continue;
        }
        // a change window may hold some: the batch hears it first (they leave their slots)
        const { start, held } = this.windows.split(t, wf, current, e.install_ids);
        if (held.length) queue.unshift({ type: 'hold', install_ids: held });
        if (!start.length) continue;
        this.spawning.add(step.step_id);
        let refused: string | void;
        try {
          refused = this.startInstalls(t, wf, current, start);
        } finally {
          this.spawning.delete(step.step_id);
        }
        if (refused) {
          this.facts.stepEvent(t, wf, getStep(this.db, wf.workflow_id, step.step_id)!, { type: 'fail', error: refused });
          return true;
        }
        current = getStep(this.db, wf.workflow_id, step.step_id)!;
      }
      step = current;
    }
    const end = ends[0];
    if (!end) return false;
    step = getStep(this.db, wf.workflow_id, step.step_id)!;
    this.windows.closeWaits(t, wf, step);
    if (end.type === 'succeeded') return this.facts.stepEvent(t, wf, step, { type: 'succeed' });
    this.groupFailed(t, wf, step, end.failed_installs, batch.context.order.length, end.timed_out);
    return true;
  }

  /** The outcomes of the step's ended children that the batch has not heard. */
  private unheard(wf: WorkflowRow, step: StepRow, batch: BatchSnapshot): BatchEvent[] {
    const c = batch.context;
    const heard = new Set([...c.succeeded, ...c.failed.map((f) => f.install_id)]);
    return listChildWorkflows(this.db, wf.workflow_id, step.step_id)
      .filter((w) => isFinal(w.status) && c.started.includes(w.owner_id) && !heard.has(w.owner_id))
      .map((w) => ({
        type: 'ended' as const,
        install_id: w.owner_id,
        workflow_id: w.workflow_id,
        ok: w.status === 'succeeded',
        error: w.error,
      }));
  }

  /**
   * Over its budget: the step fails, the run records why and, to roll back, gets a rollback step
   * for this group's started installs and one per group deployed before it, newest first.
   */
  private groupFailed(t: Tx, wf: WorkflowRow, step: StepRow, failed: FailedInstall[], size: number, timedOut: string[] = []): void {
    const rollout: Rollout = timedOut.length
      ? { run_id: wf.workflow_id, trigger: 'window_timeout', install_ids: timedOut, ...(failed.length ? { failed_installs: failed } : {}) }
      : { run_id: wf.workflow_id, trigger: 'deploy_failed', failed_installs: failed };
    const error = timedOut.length
      ? `no change window let ${timedOut.map((id) => installName(this.db, id)).join(', ')} start ` +
        `within window_timeout ${rolloutParamsOf(wf.params).policy?.window_timeout ?? '24h'}`
      : `${failed.length} of ${size} installs did not apply the config (${failed.map((f) => `${f.install_id}: ${f.error}`).join('; ')})`;
    failGroup({ db: this.db, facts: this.facts, run: this.run }, t, wf, step, { rollout, error, cancelPending: false });
  }
}

/** An install as an error names it: `name (id)`. */
function installName(db: Db, id: string): string {
  const i = getInstallById(db, id);
  return i ? `${i.name} (${id})` : id;
}

/** The group's installs in the order they start: by creation time (CONTRACT 4.3), those gone left out. */
function installOrder(db: Db, ids: string[]): string[] {
  return ids
    .map((id) => getInstallById(db, id))
    .filter((i): i is Install => !!i)
    .sort((a, b) => a.created_at.localeCompare(b.created_at) || a.install_id.localeCompare(b.install_id))
    .map((i) => i.install_id);
}
