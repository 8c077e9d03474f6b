// Workflows the engine runs, step by step (CONTRACT 4.2, 5): every change of a workflow or step
// goes through its pure machine (machines/), which says whether it is legal and which facts it
// emits; the new state and the facts commit in the caller's transaction (Tx).
import { getConfig } from '../../store/apps.ts';
import { getActionById, getComponent, getInstallById, setProvisioned, type Install } from '../../store/installs.ts';
import { orgRunner } from '../../store/runners.ts';
import {
  cancelWorkflowJobs,
  getJob,
  getStep,
  getWorkflow,
  insertJob,
  insertStep,
  insertWorkflow,
  listBakingSteps,
  listChildWorkflows,
  listSteps,
  setWorkflowParams,
  setJobStatus,
  setVersionStatusForWorkflow,
  updateStep,
  updateWorkflowStatus,
  type StepRow,
  type WorkflowFields,
  type WorkflowRow,
} from '../../store/workflows.ts';
import type { Db } from '../../store/db.ts';
import {
  advanceHealthGate,
  advanceStep,
  advanceWorkflow,
  compositeVerdict,
  initialHealthGate,
  type GateContext,
  type GateEmit,
  type GateEvent,
  type GateStatus,
  type GateTrip,
  type StepEvent,
  type WorkflowEvent,
} from '../../machines/index.ts';
import type { ParentRef } from '../domain/facts.ts';
import type { WorkflowStatus } from '../domain/status.ts';
import { GATE_VERDICTS, type HealthGate, type Rollout } from '../domain/rollout.ts';
import { isFinal, type RunOutcome, type OwnerType } from '../domain/status.ts';
import { ConflictError, NotFoundError } from '../domain/errors.ts';
import { newId } from '../domain/ids.ts';
import { rollbackGroupStep, type StepDef } from './definitions.ts';
import { diffConfigs } from './config-diff.ts';
import { durationMs, outcomeOf, scopeOf, stepRef, workflowRef } from './fact-refs.ts';
import type { Tx } from './transaction.ts';

/** What a producer's message did (CONTRACT 5.2 svc_ingest_messages_total), invalid ones aside. */
export type IngestResult = 'accepted' | 'duplicate' | 'ignored';

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

/** A runner's report on a job (CONTRACT 5.2). */
export interface JobReport {
  status: 'started' | RunOutcome;
  error?: string;
  plan?: { changes: Array<{ address: string; action: string }> };
}

/**
 * A step of kind `children` starts child workflows; which ones is the engine's business
 * (config-apply). Returns why it started none when it refuses (the step fails with that error).
 */
export type StartChildren = (t: Tx, wf: WorkflowRow, step: StepRow) => string | void;

/** A bake step's health gate machine, kept in the step's params. */
interface GateSnapshot {
  state: GateStatus;
  context: GateContext;
}

/** The run's rollout record once its health gate tripped (CONTRACT 4.3 `data.rollout`). */
const rolloutOf = (wf: WorkflowFields): { rollout?: Rollout } => (wf.params.rollout ? { rollout: wf.params.rollout as Rollout } : {});

const TARGET_PREFIX: Record<string, string> = {
  install_deploys: 'dep',
  install_sandbox_runs: 'sbr',
  install_action_workflow_runs: 'awr',
  install_stack_versions: 'stv',
};

export class Workflows {
  /** children steps whose child workflows are being started right now (see runStep) */
  private readonly spawning = new Set<string>();

  constructor(
    private readonly db: Db,
    private readonly startChildren: StartChildren,
  ) {}

  /** Create a workflow and its steps, emit `started`, and run its first step. */
  start(t: Tx, spec: StartWorkflow): WorkflowRow {
    const id = newId('wf');
    // stored started (one INSERT, its `started` emitted), then its steps
    this.insertWorkflowWithEvent(
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
    this.insertSteps(spec.org_id, id, spec.steps, 0);
    this.advance(t, id);
    return getWorkflow(this.db, id)!;
  }

  private insertSteps(orgId: string, workflowId: string, defs: StepDef[], firstIdx: number): void {
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
        for (const s of steps) if (s.status === 'pending' && !s.params.rollback) this.stepEvent(t, wf, s, { type: 'cancel' });
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

  /** Begin one step. Returns true when the step finished at once and the loop should go on. */
  private runStep(t: Tx, wf: WorkflowRow, step: StepRow): boolean {
    const kind = step.params.kind as string;
    if (step.execution_type === 'skipped' || (step.execution_type === 'hidden' && kind !== 'job')) {
      this.stepEvent(t, wf, step, { type: 'skip' });
      return true;
    }
    if (kind === 'bake') return this.startBake(t, wf, step);
    if (kind === 'approval') {
      const plan = this.groupPlan(wf, step);
      const requested = updateStep(this.db, { workflow_id: wf.workflow_id, step_id: step.step_id, plan, approval: { status: 'requested', plan } })!;
      this.stepEvent(t, wf, requested, { type: 'request_approval' });
      return false;
    }
    if (kind === 'children') {
      this.stepEvent(t, wf, step, { type: 'start' });
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
        this.stepEvent(t, wf, getStep(this.db, wf.workflow_id, step.step_id)!, { type: 'fail', error: refused });
        return true;
      }
      return this.settleChildren(t, wf, getStep(this.db, wf.workflow_id, step.step_id)!);
    }
    // a job for a runner
    const missing = this.missingActionInput(wf, step);
    if (missing) {
      this.stepEvent(t, wf, step, { type: 'fail', error: `missing required input: ${missing}` });
      return true;
    }
    if (step.params.job_id) return false; // already sent, waiting for the runner
    this.queueJob(t, wf, step);
    return false;
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
      this.stepEvent(t, wf, step, { type: 'fail', error: 'no runner for this step' });
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
    insertJob(this.db, { job_id: jobId, org_id: wf.org_id, runner_id: runnerId, workflow_id: wf.workflow_id, step_id: step.step_id, payload, status: 'queued' });
    updateStep(this.db, { workflow_id: wf.workflow_id, step_id: step.step_id, params: { ...step.params, job_id: jobId } });
    t.jobsChanged();
  }

  private finish(t: Tx, wf: WorkflowRow, outcome: RunOutcome, error?: string): void {
    const stepStatuses = listSteps(this.db, wf.workflow_id).map((s) => s.status);
    if (!this.workflowEvent(t, wf, { type: 'finish', outcome, error, stepStatuses })) return;
    cancelWorkflowJobs(this.db, wf.workflow_id);
    setVersionStatusForWorkflow(this.db, wf.workflow_id, outcome);
    if (outcome === 'succeeded' && wf.owner_type === 'installs') {
      if (wf.type === 'provision' || wf.type === 'reprovision') setProvisioned(this.db, wf.owner_id, true);
      if (wf.type === 'deprovision') setProvisioned(this.db, wf.owner_id, false);
    }
    if (wf.parent) this.childFinished(t, wf.parent);
  }

  // ------------------------------------------------------------------ machines → facts

  /** Apply an event to a step through the step machine; persist; emit its facts. Returns whether it changed anything. */
  stepEvent(t: Tx, wf: WorkflowRow, step: StepRow, ev: StepEvent, extra?: { duration_ms?: number }): boolean {
    return this.stepEventRow(t, wf, step, ev, extra) !== null;
  }

  /**
   * A step not stored yet, stored in the state its first event leads to (one INSERT, not an
   * INSERT and an UPDATE of the same row), and that event's facts emitted. Returns whether the
   * event changed anything (when not, the step is stored as given).
   */
  insertStepWithEvent(t: Tx, wf: WorkflowRow, step: StepRow, ev: StepEvent, extra?: { duration_ms?: number }): boolean {
    const changed = this.stepEventRow(t, wf, step, ev, extra, (fields) => insertStep(this.db, { ...step, ...definedOnly(fields) })) !== null;
    if (!changed) insertStep(this.db, step);
    return changed;
  }

  /** stepEvent, returning the step as updated (null when nothing changed); `write` stores the changed fields (an UPDATE by default). */
  private stepEventRow(
    t: Tx,
    wf: WorkflowRow,
    step: StepRow,
    ev: StepEvent,
    extra?: { duration_ms?: number },
    write: (fields: Partial<StepRow>) => StepRow = (fields) => updateStep(this.db, { workflow_id: step.workflow_id, step_id: step.step_id, ...fields })!,
  ): StepRow | null {
    const silent = step.execution_type === 'hidden' || step.execution_type === 'skipped';
    const r = advanceStep(step.status, { silent }, ev);
    if (!r.changed) return null;
    const now = t.now;
    const status = r.state;
    const startedAt = step.started_at ?? (status !== 'pending' && status !== 'cancelled' && status !== 'skipped' ? now : null);
    const error = ev.type === 'fail' ? (ev.error ?? 'failed') : ev.type === 'reject' ? (ev.error ?? 'approval rejected') : null;
    const fresh = write({
      status,
      started_at: startedAt ?? undefined,
      finished_at: isFinal(status) && status !== 'skipped' ? now : undefined,
      error: error ?? undefined,
    });
    const scope = scopeOf(this.db, wf, fresh);
    for (const f of r.emitted) {
      if (f.type === 'lifecycle') {
        t.emit({
          kind: 'workflow_step',
          transition: f.transition,
          org_id: wf.org_id,
          time: now,
          workflow: workflowRef(wf),
          step: stepRef(fresh),
          ...scope,
          ...outcomeOf(f.transition, () => extra?.duration_ms ?? durationMs(startedAt, now), error ?? f.error ?? 'failed'),
          ...rolloutOf(wf),
        });
      } else {
        const a = fresh.approval ?? { status: f.transition };
        t.emit({
          kind: 'workflow_step_approval',
          transition: f.transition,
          org_id: wf.org_id,
          time: now,
          workflow: workflowRef(wf),
          step: stepRef(fresh),
          ...scope,
          approval: { ...a, status: f.transition },
        });
      }
    }
    return fresh;
  }

  /** Apply an event to a workflow through the workflow machine; persist; emit. */
  workflowEvent(t: Tx, wf: WorkflowRow, ev: WorkflowEvent, extra?: { duration_ms?: number }): boolean {
    return this.applyWorkflowEvent(t, wf, ev, extra, (status, fields) => updateWorkflowStatus(this.db, wf.workflow_id, status, fields)) !== null;
  }

  /**
   * A workflow not stored yet, stored in the state its first event leads to (one INSERT, not an
   * INSERT and an UPDATE of the same row), and that event's facts emitted. Returns the row as
   * stored and whether the event changed anything (when not, the row is stored as given).
   */
  insertWorkflowWithEvent(t: Tx, wf: WorkflowFields, ev: WorkflowEvent, extra?: { duration_ms?: number }): { workflow: WorkflowRow; changed: boolean } {
    const stored: { row?: WorkflowRow } = {};
    const changed =
      this.applyWorkflowEvent(t, wf, ev, extra, (status, fields) => {
        stored.row = insertWorkflow(this.db, { ...wf, status, error: fields.error ?? wf.error, started_at: fields.started_at, finished_at: fields.finished_at ?? wf.finished_at });
      }) !== null;
    return { workflow: stored.row ?? insertWorkflow(this.db, wf), changed };
  }

  /** The machine's step for a workflow event; `write` persists the new state; then the facts. Null when nothing changed. */
  private applyWorkflowEvent(
    t: Tx,
    wf: WorkflowFields,
    ev: WorkflowEvent,
    extra: { duration_ms?: number } | undefined,
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
        ...outcomeOf(f.transition, () => extra?.duration_ms ?? durationMs(startedAt, now), error ?? 'workflow failed'),
        ...rolloutOf(wf),
      });
    }
    return r.state;
  }

  // ------------------------------------------------------------------ runner results

  /** A runner's report on a job (CONTRACT 5.2). Throws NotFoundError for an unknown job. */
  jobReport(t: Tx, orgId: string, jobId: string, msg: JobReport): IngestResult {
    const job = getJob(this.db, orgId, jobId);
    if (!job) throw new NotFoundError('job', jobId);
    const wf = getWorkflow(this.db, job.workflow_id);
    const step = getStep(this.db, job.workflow_id, job.step_id);
    if (!wf || !step) throw new NotFoundError('job', jobId);
    if (job.status === 'cancelled' || job.status === 'done') return step.status === msg.status ? 'duplicate' : 'ignored';
    if (msg.status === 'started') {
      if (!this.stepEvent(t, wf, step, { type: 'start' })) return step.status === 'started' ? 'duplicate' : 'ignored';
      setJobStatus(this.db, jobId, 'started');
      return 'accepted';
    }
    const ev: StepEvent = msg.status === 'succeeded' ? { type: 'succeed' } : msg.status === 'failed' ? { type: 'fail', error: msg.error || 'job failed' } : { type: 'cancel' };
    const planned = msg.plan ? updateStep(this.db, { workflow_id: wf.workflow_id, step_id: step.step_id, plan: msg.plan })! : step;
    const ended = this.stepEventRow(t, wf, planned, ev);
    if (!ended) return step.status === msg.status ? 'duplicate' : 'ignored';
    setJobStatus(this.db, jobId, 'done');
    if (msg.status === 'succeeded' && msg.plan) this.detectDrift(t, wf, ended, msg.plan.changes);
    this.advance(t, wf.workflow_id);
    return 'accepted';
  }

  /** Drift (CONTRACT 5.2): a plan of a drift scan with any change that is not a no-op. */
  private detectDrift(t: Tx, wf: WorkflowRow, step: StepRow, changes: Array<{ address: string; action: string }>): void {
    if (wf.type !== 'drift_run' && wf.type !== 'drift_run_reprovision_sandbox') return;
    const real = changes.filter((c) => c.action !== 'no-op');
    if (!real.length) return;
    const on = { ...(step.component_id ? { component_id: step.component_id } : {}), ...(step.sandbox_id ? { sandbox_id: step.sandbox_id } : {}) };
    t.emit({
      kind: 'drift_detected',
      transition: 'detected',
      org_id: wf.org_id,
      time: t.now,
      workflow: workflowRef(wf),
      step: stepRef(step),
      install_id: wf.owner_id,
      ...on,
      drift: { ...on, changes: real },
    });
  }

  // ------------------------------------------------------------------ approvals, cancel

  respondToApproval(t: Tx, orgId: string, workflowId: string, stepId: string, response: 'approved' | 'rejected', note?: string): StepRow {
    const wf = getWorkflow(this.db, workflowId);
    if (!wf || wf.org_id !== orgId) throw new NotFoundError('workflow', workflowId);
    const step = getStep(this.db, workflowId, stepId);
    if (!step) throw new NotFoundError('step', stepId);
    if (step.status !== 'awaiting_approval') throw new ConflictError(`step ${step.name} is not awaiting approval (status ${step.status})`);
    const approval = { ...(step.approval ?? {}), status: response, responded_at: t.now, ...(note !== undefined ? { note } : {}) };
    delete (approval as { plan?: unknown }).plan;
    const fresh = updateStep(this.db, { workflow_id: workflowId, step_id: stepId, approval })!;
    const ok =
      response === 'approved'
        ? this.stepEvent(t, wf, fresh, { type: 'approve' })
        : this.stepEvent(t, wf, fresh, { type: 'reject', error: `approval rejected${note ? `: ${note}` : ''}` });
    if (!ok) throw new ConflictError(`step ${step.name} is not awaiting approval`);
    // keep the plan on the step for GET workflow
    updateStep(this.db, { workflow_id: workflowId, step_id: stepId, approval: { ...approval, plan: step.plan ?? undefined } });
    this.advance(t, workflowId);
    return getStep(this.db, workflowId, stepId)!;
  }

  cancel(t: Tx, orgId: string, workflowId: string): WorkflowRow {
    const wf = getWorkflow(this.db, workflowId);
    if (!wf || wf.org_id !== orgId) throw new NotFoundError('workflow', workflowId);
    if (isFinal(wf.status)) throw new ConflictError(`workflow ${workflowId} already ${wf.status}`);
    this.cancelTree(t, wf);
    return getWorkflow(this.db, workflowId)!;
  }

  private cancelTree(t: Tx, wf: WorkflowRow): void {
    for (const s of listSteps(this.db, wf.workflow_id)) {
      // the step first, so that its children ending cancelled do not fail it
      if (!isFinal(s.status)) this.stepEvent(t, wf, s, { type: 'cancel' });
      for (const child of listChildWorkflows(this.db, wf.workflow_id, s.step_id)) {
        if (!isFinal(child.status)) this.cancelTree(t, child);
      }
    }
    cancelWorkflowJobs(this.db, wf.workflow_id);
    const fresh = getWorkflow(this.db, wf.workflow_id)!;
    if (!isFinal(fresh.status)) this.finish(t, fresh, 'cancelled');
  }

  // ------------------------------------------------------------------ branch runs and app rollbacks

  /** The plan of a group's approval step: per install, its current config, the run's target for it and the diff. */
  private groupPlan(wf: WorkflowRow, step: StepRow): unknown {
    const installs = ((step.params.install_ids as string[]) ?? []).map((id) => getInstallById(this.db, id)).filter((i): i is Install => !!i);
    return {
      install_group: step.params.group,
      installs: installs.map((i) => {
        const current = i.app_config_id ? getConfig(this.db, wf.org_id, i.app_config_id) : undefined;
        const target = getConfig(this.db, wf.org_id, runTargetOf(wf, i.install_id));
        return {
          install_id: i.install_id,
          install_name: i.name,
          labels: i.labels,
          old_app_config_id: i.app_config_id,
          new_app_config_id: target?.app_config_id ?? null,
          diff: diffConfigs(current?.body ?? null, target?.body ?? { components: [] }),
        };
      }),
    };
  }

  // ------------------------------------------------------------------ health gates (CONTRACT 4.3)

  /** Begin a bake: the gate starts from the group's verdicts now (one already bad counts). Returns whether it ended at once. */
  private startBake(t: Tx, wf: WorkflowRow, step: StepRow): boolean {
    const started = this.stepEventRow(t, wf, step, { type: 'start' }) ?? step;
    const gate = wf.params.health_gate as HealthGate | undefined;
    const at = Date.parse(t.now);
    const from = initialHealthGate({ on: gate?.on ?? [...GATE_VERDICTS], ends_at: at + (gate?.bake_ms ?? 0) });
    const now = ((step.params.install_ids as string[]) ?? []).map((id) => this.healthNow(id)).filter((e): e is GateEvent => e !== null);
    return this.feedGate(t, wf, started, [...now, { type: 'tick', at }], from);
  }

  /** An install's composite verdict now, with the component behind it and that component's reason; null when none is known. */
  private healthNow(installId: string): GateEvent | null {
    const install = getInstallById(this.db, installId);
    if (!install) return null;
    const verdicts = install.health_ctx.verdicts;
    const verdict = compositeVerdict(verdicts);
    if (!verdict) return null;
    const componentId = Object.keys(verdicts).find((id) => verdicts[id] === verdict)!;
    return { type: 'health', install_id: installId, component_id: componentId, verdict, reason: getComponent(this.db, installId, componentId)?.health_reason ?? null };
  }

  /** Feed a baking step's gate; act on what it emits (pass: the step succeeds; trip: it fails). Returns whether the step ended. */
  private feedGate(t: Tx, wf: WorkflowRow, step: StepRow, events: GateEvent[], from?: GateSnapshot): boolean {
    let gate = from ?? (step.params.gate as GateSnapshot);
    const emitted: GateEmit[] = [];
    for (const ev of events) {
      const r = advanceHealthGate(gate.state, gate.context, ev);
      if (!r.changed) continue;
      gate = { state: r.state, context: r.context };
      emitted.push(...r.emitted);
    }
    const fresh = updateStep(this.db, { workflow_id: step.workflow_id, step_id: step.step_id, params: { ...step.params, gate } })!;
    for (const e of emitted) {
      if (e.type === 'passed') return this.stepEvent(t, wf, fresh, { type: 'succeed' });
      if (e.type === 'tripped') {
        this.tripGate(t, wf, fresh, e.trip);
        return true;
      }
    }
    return false;
  }

  /**
   * The gate tripped: the run records why (its events carry `rollout` from now on), the bake fails,
   * later groups are cancelled and, with `action: "rollback"`, every group already deployed gets a
   * rollback step, newest first, back to the configs its installs had before the run.
   */
  private tripGate(t: Tx, wf: WorkflowRow, step: StepRow, trip: GateTrip): void {
    const rollout: Rollout = { run_id: wf.workflow_id, trigger: 'health_gate', ...trip };
    const run = setWorkflowParams(this.db, wf.workflow_id, { ...wf.params, rollout })!;
    this.stepEvent(t, run, step, { type: 'fail', error: this.tripError(trip) });
    const steps = listSteps(this.db, run.workflow_id);
    for (const s of steps) if (s.status === 'pending') this.stepEvent(t, run, s, { type: 'cancel' });
    if ((run.params.health_gate as HealthGate | undefined)?.action !== 'rollback') return;
    const deployed = steps.filter((s) => s.params.kind === 'children' && !s.params.rollback && s.status === 'succeeded').reverse();
    const rollbacks = deployed.map((d) => {
      const before = (d.params.before as Record<string, string> | undefined) ?? {};
      return rollbackGroupStep(String(d.params.group), Object.keys(before), before);
    });
    this.insertSteps(run.org_id, run.workflow_id, rollbacks, Math.max(...steps.map((s) => s.idx)) + 1);
  }

  /** outcome.error of a tripped bake: the install, the component, the verdict and its reason. */
  private tripError(trip: GateTrip): string {
    const install = getInstallById(this.db, trip.install_id);
    const component = getComponent(this.db, trip.install_id, trip.component_id);
    const name = (n: string | undefined, id: string) => (n ? `${n} (${id})` : id);
    return `health gate: install ${name(install?.name, trip.install_id)} component ${name(component?.name, trip.component_id)} is ${trip.verdict}: ${trip.reason ?? 'no reason given'}`;
  }

  /** A verdict changed an install's health: the bakes watching it see its composite verdict. */
  installHealthChanged(t: Tx, orgId: string, installId: string): void {
    for (const step of listBakingSteps(this.db, orgId)) {
      if (!((step.params.install_ids as string[]) ?? []).includes(installId)) continue;
      const ev = this.healthNow(installId);
      const wf = getWorkflow(this.db, step.workflow_id);
      if (!ev || !wf) continue;
      if (this.feedGate(t, wf, step, [ev])) this.advance(t, wf.workflow_id);
    }
  }

  /** The engine's clock moved: bakes whose time is up pass. */
  bakeTick(t: Tx): void {
    const at = Date.parse(t.now);
    for (const step of listBakingSteps(this.db)) {
      const wf = getWorkflow(this.db, step.workflow_id);
      if (wf && this.feedGate(t, wf, step, [{ type: 'tick', at }])) this.advance(t, wf.workflow_id);
    }
  }

  private childFinished(t: Tx, parent: ParentRef): void {
    if (this.spawning.has(parent.step_id)) return; // runStep settles the step once every child is started
    const wf = getWorkflow(this.db, parent.workflow_id);
    const step = wf && getStep(this.db, parent.workflow_id, parent.step_id);
    if (!wf || !step) return;
    if (this.settleChildren(t, wf, step)) this.advance(t, wf.workflow_id);
  }

  /** End a started children step whose child workflows have all ended (none = succeeded). Returns whether it ended. */
  private settleChildren(t: Tx, wf: WorkflowRow, step: StepRow): boolean {
    if (step.status !== 'started') return false;
    const children = listChildWorkflows(this.db, wf.workflow_id, step.step_id);
    if (children.some((c) => !isFinal(c.status))) return false;
    const bad = children.filter((c) => c.status !== 'succeeded');
    if (bad.length) return this.stepEvent(t, wf, step, { type: 'fail', error: `${bad.length} of ${children.length} installs did not apply the config` });
    return this.stepEvent(t, wf, step, { type: 'succeed' });
  }
}

/** The fields given a value (an update leaves the others as they are). */
function definedOnly<T extends object>(fields: T): Partial<T> {
  return Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/** The config a run (branch run or app rollback) moves an install to: its own target, else the run's one config. */
export function runTargetOf(wf: WorkflowRow, installId: string): string {
  return (wf.params.targets as Record<string, string> | undefined)?.[installId] ?? (wf.params.app_config_id as string);
}
