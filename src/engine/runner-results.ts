// Runner results and drift (CONTRACT 5.2): a runner's report on a job moves its step (started,
// then an outcome, with the plan it made); a drift scan's plan with real changes is drift.
import { getJob, getStep, getWorkflow, setJobStatus, updateStep, type StepRow, type WorkflowRow } from '../../store/workflows.ts';
import type { Db } from '../../store/db.ts';
import type { StepEvent } from '../../machines/step.ts';
import type { RunOutcome } from '../domain/status.ts';
import { NotFoundError } from '../domain/errors.ts';
import { stepRef, workflowRef } from './fact-refs.ts';
import type { WorkflowFacts } from './workflow-facts.ts';
import type { Tx } from './transaction.ts';
import type { RunControl } from './steps/run-control.ts';

/** What a producer's message did (CONTRACT 5.2 svc_ingest_messages_total), invalid ones aside. */
export type IngestResult = 'accepted' | 'duplicate' | 'ignored';

/**
 * A producer's fact stored as before but that can never emit an event (CONTRACT 10.3): answered
 * `{ok: true, warning}` and counted `unclassified`.
 */
export interface Unclassified {
  result: 'unclassified';
  warning: string;
}

/** A runner's report on a job (CONTRACT 5.2). */
export interface JobReport {
  status: 'started' | RunOutcome;
  error?: string;
  plan?: { changes: Array<{ address: string; action: string }> };
}

export class RunnerResults {
  constructor(
    private readonly db: Db,
    private readonly facts: WorkflowFacts,
    private readonly run: RunControl,
  ) {}

  /** A runner's report on a job (CONTRACT 5.2). Throws NotFoundError for an unknown job. */
  jobReport(t: Tx, orgId: string, jobId: string, msg: JobReport): IngestResult {
    const job = getJob(this.db, orgId, jobId);
    if (!job) throw new NotFoundError('job', jobId);
    const wf = getWorkflow(this.db, job.workflow_id);
    const step = getStep(this.db, job.workflow_id, job.step_id);
    if (!wf || !step) throw new NotFoundError('job', jobId);
    if (job.status === 'cancelled' || job.status === 'done') return step.status === msg.status ? 'duplicate' : 'ignored';
    if (msg.status === 'started') {
      if (!this.facts.stepEvent(t, wf, step, { type: 'start' })) return step.status === 'started' ? 'duplicate' : 'ignored';
      setJobStatus(this.db, jobId, 'started');
      return 'accepted';
    }
    const ev: StepEvent =
      msg.status === 'succeeded'
        ? { type: 'succeed' }
        : msg.status === 'failed'
          ? { type: 'fail', error: msg.error || 'job failed' }
          : { type: 'cancel' };
    const planned = msg.plan ? updateStep(this.db, { workflow_id: wf.workflow_id, step_id: step.step_id, plan: msg.plan })! : step;
    const ended = this.facts.stepEventRow(t, wf, planned, ev);
    if (!ended) return step.status === msg.status ? 'duplicate' : 'ignored';
    setJobStatus(this.db, jobId, 'done');
    if (msg.status === 'succeeded' && msg.plan) this.detectDrift(t, wf, ended, msg.plan.changes);
    this.run.advance(t, wf.workflow_id);
    return 'accepted';
  }

  /** Drift (CONTRACT 5.2): a plan of a drift scan with any change that is not a no-op. */
  private detectDrift(t: Tx, wf: WorkflowRow, step: StepRow, changes: Array<{ address: string; action: string }>): void {
    if (wf.type !== 'drift_run' && wf.type !== 'drift_run_reprovision_sandbox') return;
    const real = changes.filter((c) => c.action !== 'no-op');
    if (!real.length) return;
    const on = {
      ...(step.component_id ? { component_id: step.component_id } : {}),
      ...(step.sandbox_id ? { sandbox_id: step.sandbox_id } : {}),
    };
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
}
