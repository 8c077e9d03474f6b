// The step handlers (src/engine/steps/) on their own, for their unit tests: a WorkflowRuns with its
// registry and a Wakeups on a ManualClock, over an EngineWorld's store (its org, app, configs and
// installs) and inside its engine's transactions. The wakeups are heard here: a bake's tick, the
// windows' review, a verify step's asks are recorded (a test polls it through the handler).
import type { WorkflowRow, StepRow } from '../../../store/workflows.ts';
import { getStep, getWorkflow, listSteps } from '../../../store/workflows.ts';
import type { ParentRef } from '../../../src/domain/facts.ts';
import { newId } from '../../../src/domain/ids.ts';
import type { StepDef } from '../../../src/engine/definitions.ts';
import type { Tx } from '../../../src/engine/transaction.ts';
import { Wakeups } from '../../../src/engine/wakeups.ts';
import { WorkflowFacts } from '../../../src/engine/workflow-facts.ts';
import { WorkflowRuns, type StartChildren } from '../../../src/engine/workflow-runs.ts';
import { reportHealth } from '../../../src/engine/health-verdicts.ts';
import { listComponents, type Install } from '../../../store/installs.ts';
import { EngineWorld } from '../../helpers/engine.ts';

export class StepWorld {
  readonly w = new EngineWorld();
  readonly db = this.w.db;
  readonly clock = this.w.clock;
  readonly org = this.w.org();
  readonly config = this.w.config(this.org);
  readonly facts = new WorkflowFacts(this.db);
  readonly wakeups = new Wakeups(this.clock);
  /** the verify steps woken, as `workflowId/stepId@ms` */
  readonly verifyWakes: string[] = [];
  /** what a children or group-deploy step starts (set by a test; default: nothing) */
  startChildren: StartChildren = () => {};
  readonly runs: WorkflowRuns;

  constructor() {
    this.runs = new WorkflowRuns(this.db, this.facts, (t, wf, step, only) => this.startChildren(t, wf, step, only), this.wakeups);
    this.wakeups.listen({
      bakes: () => this.tx((t) => this.runs.steps.bake.bakeTick(t)),
      windows: () =>
        this.tx((t) => {
          for (const id of this.runs.steps['group-deploy'].reviewWaits(t)) this.runs.advance(t, id);
        }),
      verify: (workflowId, stepId, at) => void this.verifyWakes.push(`${workflowId}/${stepId}@${at}`),
      approvals: () => this.tx((t) => this.runs.steps.approval.expireDue(t)),
    });
  }

  tx<T>(fn: (t: Tx) => T): T {
    return this.w.engine.change(fn);
  }

  install(labels: Record<string, string> = {}): Install {
    return this.w.install(this.org, this.config, labels);
  }

  /** A run of the app (an app_branch_run) with these steps and params, started (its first step begun). */
  run(steps: StepDef[], params: Record<string, unknown> = {}): WorkflowRow {
    return this.tx((t) =>
      this.runs.start(t, {
        org_id: this.org,
        type: 'app_branch_run',
        owner_id: newId('br'),
        owner_type: 'app_branches',
        params: { app_id: this.config.app_id, app_config_id: this.config.app_config_id, ...params },
        steps,
      }),
    );
  }

  /** A child workflow of `parent`'s step, for an install, with one approval step (it waits until answered). */
  child(t: Tx, parent: WorkflowRow, step: StepRow, installId: string): WorkflowRow {
    const ref: ParentRef = { workflow_id: parent.workflow_id, step_id: step.step_id, kind: 'workflow_step' };
    return this.runs.start(t, {
      org_id: this.org,
      type: 'app_config_update',
      owner_id: installId,
      owner_type: 'installs',
      parent: ref,
      steps: [{ name: 'hold', target_type: null, execution_type: 'approval', kind: 'approval' }],
    });
  }

  /** Answer a child's (or any run's) step awaiting approval. */
  answer(wf: WorkflowRow, response: 'approved' | 'rejected'): void {
    const step = this.steps(wf).find((s) => s.status === 'awaiting_approval')!;
    this.tx((t) => this.runs.steps.approval.respondToApproval(t, this.org, wf.workflow_id, step.step_id, response, undefined, null));
  }

  /** A component's verdict reaches its install, and the bakes watching it hear (as the engine's ingest does). */
  health(install: Install, verdict: 'healthy' | 'degraded' | 'unhealthy', reason?: string): void {
    const componentId = listComponents(this.db, install.install_id)[0].component_id;
    this.tx((t) => {
      reportHealth(t, this.db, this.org, install.install_id, { component_id: componentId, verdict, reason });
      this.runs.steps.bake.installHealthChanged(t, this.org, install.install_id);
    });
  }

  wf(id: string): WorkflowRow {
    return getWorkflow(this.db, id)!;
  }

  steps(wf: WorkflowRow): StepRow[] {
    return listSteps(this.db, wf.workflow_id);
  }

  step(wf: WorkflowRow, name: string): StepRow {
    const s = this.steps(wf).find((x) => x.name === name);
    if (!s) throw new Error(`no step ${name}`);
    return getStep(this.db, wf.workflow_id, s.step_id)!;
  }

  close(): void {
    this.w.close();
  }
}
