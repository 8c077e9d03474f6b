// Job steps (CONTRACT 5.2): a job for the install's (or the org's) runner, queued once; the step
// waits for the runner's reports (src/engine/runner-results.ts). An action run missing a required
// input fails at once.
import { getActionById, getInstallById } from '../../../store/installs.ts';
import { orgRunner } from '../../../store/runners.ts';
import { insertJob, updateStep, type StepRow, type WorkflowRow } from '../../../store/workflows.ts';
import type { Db } from '../../../store/db.ts';
import { newId } from '../../domain/ids.ts';
import type { WorkflowFacts } from '../workflow-facts.ts';
import type { Tx } from '../transaction.ts';
import type { StepHandler } from './handlers.ts';
import { runParamsOf } from './state.ts';

export class JobSteps implements StepHandler {
  constructor(
    private readonly db: Db,
    private readonly facts: WorkflowFacts,
  ) {}

  /** Queue the step's job (once). Returns true only when it failed at once (a required input missing, no runner to run it). */
  begin(t: Tx, wf: WorkflowRow, step: StepRow): boolean {
    const missing = this.missingActionInput(wf, step);
    if (missing) {
      this.facts.stepEvent(t, wf, step, { type: 'fail', error: `missing required input: ${missing}` });
      return true;
    }
    if (step.params.job_id) return false; // already sent, waiting for the runner
    return !this.queueJob(t, wf, step);
  }

  /** A job has no child workflows. */
  childEnded(): boolean {
    return false;
  }

  private missingActionInput(wf: WorkflowRow, step: StepRow): string | null {
    if (step.operation !== 'action.run' || !wf.action_id) return null;
    const action = getActionById(this.db, wf.action_id);
    const given = runParamsOf(wf).inputs ?? {};
    for (const [name, spec] of Object.entries(action?.inputs ?? {})) {
      if (spec?.required && (given[name] === undefined || given[name] === null)) return name;
    }
    return null;
  }

  /** Queue the step's job; false when there is no runner to run it (the step has failed). */
  private queueJob(t: Tx, wf: WorkflowRow, step: StepRow): boolean {
    const install = wf.owner_type === 'installs' ? getInstallById(this.db, wf.owner_id) : undefined;
    const runnerId = step.params.runner === 'org' || !install ? orgRunner(this.db, wf.org_id)?.runner_id : install.runner_id;
    if (!runnerId) {
      this.facts.stepEvent(t, wf, step, { type: 'fail', error: 'no runner for this step' });
      return false;
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
    const cfg = runParamsOf(wf).app_config_id ?? install?.app_config_id;
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
    return true;
  }
}
