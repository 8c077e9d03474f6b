// Change windows in a run's group deploy (CONTRACT 4.3 "Change windows"). When the batch
// (machines/deploy-batch.ts) says to start installs, the app's windows are asked (the pure schedule,
// src/domain/change-windows.ts) whether each may start now; one that may not is handed back to the
// batch (`hold`) and gets a `wait for change window: <install name>` step (execution_type
// `system`, kind `window`), started with `data.rollout: {install_id, next_window_at, window_ids}`.
//
// How the wait steps sit: each is a step of the run itself, stored with its deploy step's `idx`
// (so it lists right after it; the deploy step stays `started` while any of its installs waits). A
// waiting install does not occupy one of the `max_parallel` running slots: the next installs in
// order take its place, and it starts once released, as slots free. The wait step succeeds when the
// install may start: the engine's clock is woken at `next_window_at` (and the scheduler looks every
// second), and the windows are evaluated afresh whenever they change (created or deleted). One
// held longer than the run's `window_timeout` fails its wait step and the group (`timeout`: nothing
// more starts; the running updates finish; then the deploy fails with trigger `window_timeout`).
// All of it is in SQLite (the batch and the wait steps): after a restart the scheduler's tick
// picks up where it was. Updates already started are never stopped by a window closing.
import { z } from 'zod';
import { getInstallById, type Install } from '../../../store/installs.ts';
import { listChangeWindows, listWindowWaits } from '../../../store/change-windows.ts';
import { getStep, getWorkflow, updateStep, type StepRow, type WorkflowRow } from '../../../store/workflows.ts';
import type { Db } from '../../../store/db.ts';
import { windowPlanner, type RunKind, type WindowPlanner, type WindowVerdict } from '../../domain/change-windows.ts';
import { rolloutParamsOf } from '../../domain/rollout.ts';
import { newId } from '../../domain/ids.ts';
import type { BatchEvent } from '../../../machines/deploy-batch.ts';
import type { WorkflowFacts } from '../workflow-facts.ts';
import type { Tx } from '../transaction.ts';
import type { Wakeups } from '../wakeups.ts';
import type { StepHandler } from './handlers.ts';
import { runParamsOf } from './state.ts';

/** The run kind a window may apply to (CONTRACT 4.3 `applies_to`). */
export const runKindOf = (wf: WorkflowRow): RunKind => (wf.type === 'app_rollback' ? 'rollback' : 'branch_run');

/** The default of `rollout.window_timeout` (CONTRACT 4.3). */
const DEFAULT_WINDOW_TIMEOUT_MS = 24 * 3_600_000;

/** What a wait step keeps in its params. */
const waitParamsSchema = z.object({
  kind: z.literal('window'),
  deploy_step_id: z.string(),
  install_id: z.string(),
  /** when it began waiting (ms, engine clock) */
  since_ms: z.number(),
  /** `data.rollout` of its events */
  window: z.object({ install_id: z.string(), next_window_at: z.string().nullable(), window_ids: z.array(z.string()) }),
  /** when the clock should look at it again (ms): its window's opening or its timeout */
  due_ms: z.number(),
});
type WaitParams = z.infer<typeof waitParamsSchema>;

const waitOf = (s: StepRow): WaitParams => waitParamsSchema.parse(s.params);

/** When a wait step is due to be looked at again (ms, engine clock): its window's opening or its timeout. */
export const waitDueOf = (s: StepRow): number => waitOf(s).due_ms;

/** A deploy step's news from its waiting installs: those that may start now, and those that waited too long. */
export interface WaitNews {
  wf: WorkflowRow;
  step: StepRow;
  events: BatchEvent[];
}

export class WindowWaits implements StepHandler {
  constructor(
    private readonly db: Db,
    private readonly facts: WorkflowFacts,
    private readonly wakeups: Wakeups,
  ) {}

  /**
   * A wait step is inserted started by its group deploy (split) and ended by review: it is never
   * pending when the run looks for its next step. Were one found pending, it waits.
   */
  begin(): boolean {
    return false;
  }

  /** A wait has no child workflows. */
  childEnded(): boolean {
    return false;
  }

  /** Of installs the batch would start now: those that may, and those a window holds (each gets a started wait step). */
  split(t: Tx, wf: WorkflowRow, deploy: StepRow, ids: string[]): { start: string[]; held: string[] } {
    const appId = runParamsOf(wf).app_id;
    const windows = appId ? listChangeWindows(this.db, appId) : [];
    if (!windows.length) return { start: ids, held: [] };
    const at = Date.parse(t.now);
    const verdict = windowPlanner(windows, runKindOf(wf), at);
    const start: string[] = [];
    const held: string[] = [];
    for (const id of ids) {
      const install = getInstallById(this.db, id);
      const v = install ? verdict(install) : null;
      if (!install || !v || v.may_start) {
        start.push(id);
        continue;
      }
      held.push(id);
      this.openWait(t, wf, deploy, install, v, at);
    }
    return { start, held };
  }

  /** The deploy step ended: its waits still open end with it (cancelled). */
  closeWaits(t: Tx, wf: WorkflowRow, deploy: StepRow): void {
    for (const s of listWindowWaits(this.db, wf.org_id)) {
      if (s.workflow_id === wf.workflow_id && waitOf(s).deploy_step_id === deploy.step_id)
        this.facts.stepEvent(t, wf, s, { type: 'cancel' });
    }
  }

  /**
   * The waits to look at again (all of them when `appId` is given: its windows changed; else those
   * due on the clock), settled: a wait whose install may start succeeds, one past its timeout fails;
   * per deploy step, what its batch must hear.
   */
  review(t: Tx, opts: { orgId?: string; appId?: string } = {}): WaitNews[] {
    const at = Date.parse(t.now);
    const news = new Map<string, WaitNews>();
    // one planner per app and run kind of this review: each app's windows read and laid out once
    const planners = new Map<string, WindowPlanner>();
    const plannerFor = (wf: WorkflowRow): WindowPlanner => {
      const appId = String(wf.params.app_id);
      const key = `${appId}/${runKindOf(wf)}`;
      let p = planners.get(key);
      if (!p) planners.set(key, (p = windowPlanner(listChangeWindows(this.db, appId), runKindOf(wf), at)));
      return p;
    };
    for (const s of listWindowWaits(this.db, opts.orgId)) {
      const w = waitOf(s);
      const wf = getWorkflow(this.db, s.workflow_id);
      if (!wf) continue;
      if (opts.appId ? wf.params.app_id !== opts.appId : w.due_ms > at) continue;
      const deploy = getStep(this.db, s.workflow_id, w.deploy_step_id);
      if (deploy?.status !== 'started') {
        this.facts.stepEvent(t, wf, s, { type: 'cancel' });
        continue;
      }
      const install = getInstallById(this.db, w.install_id);
      const v = install ? plannerFor(wf)(install) : null;
      const key = `${wf.workflow_id}/${deploy.step_id}`;
      const entry = news.get(key) ?? { wf, step: deploy, events: [] };
      news.set(key, entry);
      if (!v || v.may_start) {
        this.facts.stepEvent(t, wf, s, { type: 'succeed' });
        entry.events.push({ type: 'release', install_ids: [w.install_id] });
        continue;
      }
      const timeout = timeoutOf(wf);
      if (at - w.since_ms > timeout) {
        this.facts.stepEvent(t, wf, s, {
          type: 'fail',
          error:
            `no change window let install ${install!.name} (${install!.install_id}) start ` +
            `within window_timeout ${rolloutParamsOf(wf.params).policy?.window_timeout ?? '24h'}`,
        });
        entry.events.push({ type: 'timeout', install_ids: [w.install_id] });
        continue;
      }
      // still held: what it waits for now (the windows may have changed), and when to look again
      const due = dueOf(v, w.since_ms, timeout);
      updateStep(this.db, {
        workflow_id: s.workflow_id,
        step_id: s.step_id,
        params: { ...s.params, window: verdictData(w.install_id, v), due_ms: due },
      });
      this.wakeups.windowsAt(due);
    }
    // the events of one deploy step in one go, the timeouts after the releases
    for (const n of news.values()) n.events.sort((a, b) => (a.type === 'timeout' ? 1 : 0) - (b.type === 'timeout' ? 1 : 0));
    return [...news.values()].filter((n) => n.events.length);
  }

  private openWait(t: Tx, wf: WorkflowRow, deploy: StepRow, install: Install, v: WindowVerdict, at: number): void {
    const timeout = timeoutOf(wf);
    const due = dueOf(v, at, timeout);
    const params: WaitParams = {
      kind: 'window',
      deploy_step_id: deploy.step_id,
      install_id: install.install_id,
      since_ms: at,
      window: verdictData(install.install_id, v),
      due_ms: due,
    };
    this.facts.insertStepWithEvent(
      t,
      wf,
      {
        step_id: newId('st'),
        workflow_id: wf.workflow_id,
        org_id: wf.org_id,
        idx: deploy.idx,
        name: `wait for change window: ${install.name}`,
        target_type: null,
        target_id: null,
        component_id: null,
        sandbox_id: null,
        execution_type: 'system',
        operation: null,
        status: 'pending',
        error: null,
        plan: null,
        approval: null,
        params: { ...params, group: deploy.params.group, runner: null, action_id: null },
        started_at: null,
        finished_at: null,
      },
      { type: 'start' },
    );
    this.wakeups.windowsAt(due);
  }
}

const timeoutOf = (wf: WorkflowRow): number => rolloutParamsOf(wf.params).policy?.window_timeout_ms ?? DEFAULT_WINDOW_TIMEOUT_MS;

/** When to look at a held install again: its window's opening, or the moment it has waited too long. */
function dueOf(v: WindowVerdict, sinceMs: number, timeoutMs: number): number {
  const timesOut = sinceMs + timeoutMs + 1;
  const opens = v.next_window_at ? Date.parse(v.next_window_at) : Number.POSITIVE_INFINITY;
  return Math.min(opens, timesOut);
}

const verdictData = (installId: string, v: WindowVerdict): WaitParams['window'] => ({
  install_id: installId,
  next_window_at: v.next_window_at,
  window_ids: v.window_ids,
});

/** A plan's view of an install (CONTRACT 4.3 `plan_only`). */
export interface WindowSchedule {
  /** now, or when its next window opens (null when none will within two weeks) */
  scheduled_at: string | null;
  /** the windows holding it ([] when none) */
  blocked_by: string[];
  /** their names, in the same order (what a person reads; the ids stay the API's reference) */
  blocked_by_names: string[];
}

/**
 * A plan's schedule of an app's installs for a run of `kind` at `atMs`: the app's windows read
 * once and laid out once (windowPlanner), then asked per install, so that a plan over a fleet
 * costs its installs plus its windows, not their product.
 */
export function windowScheduler(
  db: Db,
  appId: string,
  kind: RunKind,
  atMs: number,
): (install: Pick<Install, 'install_id' | 'labels'>) => WindowSchedule {
  const windows = listChangeWindows(db, appId);
  const now = new Date(atMs).toISOString();
  if (!windows.length) return () => ({ scheduled_at: now, blocked_by: [], blocked_by_names: [] });
  const verdict = windowPlanner(windows, kind, atMs);
  const names = new Map(windows.map((w) => [w.window_id, w.name]));
  return (install) => {
    const v = verdict(install);
    if (v.may_start) return { scheduled_at: now, blocked_by: [], blocked_by_names: [] };
    const ids = [...v.window_ids];
    return { scheduled_at: v.next_window_at, blocked_by: ids, blocked_by_names: ids.map((id) => names.get(id) ?? id) };
  };
}
