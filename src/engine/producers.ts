// Facts reported by producers: external workflows, runner heartbeats and inactive messages,
// health verdicts, and the periodic runner health check (CONTRACT 5.1, 5.2).
import { nowIso } from '../../store/db.ts';
import {
  getComponent,
  getInstall,
  setComponentHealth,
  setInstallHealth,
} from '../../store/installs.ts';
import { getRunner, listRunners, saveRunnerState, type RunnerRow } from '../../store/runners.ts';
import { getStep, getWorkflow, insertStep, insertWorkflow, listSteps, type Status } from '../../store/workflows.ts';
import { advance, componentHealthMachine, installHealthMachine, runnerMachine } from '../../machines/index.ts';
import type { RunnerFact } from '../../machines/runner.ts';
import type { ComponentHealthFact as CHFact, InstallHealthFact as IHFact } from '../../machines/health.ts';
import { InvalidError, NotFoundError } from '../domain/errors.ts';
import type { RunnerInfo, Verdict } from '../domain/facts.ts';
import type { HealthMessage, RunnerMessage, WorkflowMessage } from '../ingest/schemas.ts';
import type { IngestResult, Orchestrator } from './workflows.ts';
import type { Tx } from './engine.ts';

export class Producers {
  constructor(private readonly orch: Orchestrator) {}

  private get db() {
    return this.orch.engine.db;
  }

  /** A transition of a workflow the engine did not start. */
  externalWorkflow(orgId: string, workflowId: string, msg: WorkflowMessage): IngestResult {
    return this.orch.engine.tx((t) => {
      if (msg.workflow && msg.workflow.id !== workflowId) throw new InvalidError(`workflow.id ${msg.workflow.id} does not match the subject's ${workflowId}`);
      let wf = getWorkflow(this.db, workflowId);
      if (wf && (!wf.external || wf.org_id !== orgId)) throw new InvalidError(`workflow ${workflowId} is run by the engine; producers cannot report it`);
      if (!wf) {
        if (!msg.workflow) throw new InvalidError('the first message of a workflow must carry workflow {id, type, owner_id, owner_type}');
        insertWorkflow(this.db, {
          workflow_id: workflowId,
          org_id: orgId,
          type: msg.workflow.type,
          owner_id: msg.workflow.owner_id,
          owner_type: msg.workflow.owner_type,
          parent: msg.workflow.parent ?? null,
          action_id: msg.workflow.action_id ?? null,
          external: true,
          status: 'pending',
          error: null,
          params: {},
          started_at: null,
          finished_at: null,
        });
        wf = getWorkflow(this.db, workflowId)!;
      }
      const extra = msg.duration_ms !== undefined ? { duration_ms: msg.duration_ms } : undefined;
      if (msg.kind === 'workflow') {
        const accepted =
          msg.transition === 'started'
            ? this.orch.workflowEvent(t, wf, { type: 'start' }, extra)
            : this.orch.workflowEvent(
                t,
                wf,
                { type: 'finish', outcome: msg.transition, error: msg.error, stepStatuses: listSteps(this.db, workflowId).map((s) => s.status) },
                extra,
              );
        if (accepted) return 'accepted';
        return wf.status === msg.transition ? 'duplicate' : 'ignored';
      }
      const s = msg.step!;
      let step = getStep(this.db, workflowId, s.id);
      if (!step) {
        insertStep(this.db, {
          step_id: s.id,
          workflow_id: workflowId,
          org_id: orgId,
          idx: s.idx,
          name: s.name,
          target_type: s.target_type ?? null,
          target_id: s.target_id ?? null,
          component_id: s.component_id ?? null,
          sandbox_id: s.sandbox_id ?? null,
          execution_type: s.execution_type,
          operation: null,
          status: 'pending',
          error: null,
          plan: null,
          approval: null,
          params: {},
          started_at: null,
          finished_at: null,
        });
        step = getStep(this.db, workflowId, s.id)!;
      }
      const ev =
        msg.transition === 'started'
          ? ({ type: 'start' } as const)
          : msg.transition === 'succeeded'
            ? ({ type: 'succeed' } as const)
            : msg.transition === 'failed'
              ? ({ type: 'fail', error: msg.error || 'failed' } as const)
              : ({ type: 'cancel' } as const);
      if (this.orch.stepEvent(t, wf, step, ev, extra)) return 'accepted';
      return step.status === (msg.transition as Status) ? 'duplicate' : 'ignored';
    });
  }

  /** A heartbeat or an inactive message from a runner. */
  runner(orgId: string, runnerId: string, msg: RunnerMessage): IngestResult {
    return this.orch.engine.tx((t) => {
      const runner = getRunner(this.db, orgId, runnerId);
      if (!runner) throw new NotFoundError('runner', runnerId);
      const event = msg.type === 'heartbeat' ? { type: 'heartbeat', process: msg.process } : { type: 'inactive', reason: msg.reason };
      const result = this.applyRunner(t, runner, event);
      // a heartbeat is news or nothing: never a `duplicate` (CONTRACT 5.2)
      return msg.type === 'heartbeat' && result === 'duplicate' ? 'accepted' : result;
    });
  }

  private applyRunner(t: Tx, runner: RunnerRow, event: { type: string; [k: string]: unknown }): IngestResult {
    const r = advance(runnerMachine, runner.state, runner.ctx, event);
    if (!r.accepted) return 'ignored';
    if (!r.changed) return 'duplicate';
    saveRunnerState(this.db, runner.runner_id, r.state, r.context);
    const info: RunnerInfo = { id: runner.runner_id, name: runner.name, group_id: runner.group_id, group_type: runner.group_type };
    for (const f of r.emitted as RunnerFact[]) {
      const base = { org_id: runner.org_id, time: nowIso(), runner: info, ...(runner.install_id ? { install_id: runner.install_id } : {}) };
      if (f.type === 'unhealthy') t.emit({ ...base, kind: 'runner_unhealthy', transition: 'unhealthy', reason: f.reason });
      else t.emit({ ...base, kind: 'runner_inactive', transition: 'inactive', ...(f.reason ? { reason: f.reason } : {}) });
    }
    return 'accepted';
  }

  /** The periodic runner health check: active runners without a running heartbeat go offline. */
  runnerHealthCheck(): void {
    for (const runner of listRunners(this.db)) {
      if (runner.state !== 'active') continue;
      this.orch.engine.tx((t) => {
        const fresh = getRunner(this.db, runner.org_id, runner.runner_id);
        if (fresh) this.applyRunner(t, fresh, { type: 'check' });
      });
    }
  }

  /** A component health verdict; also moves the install's composite health. */
  health(orgId: string, installId: string, msg: HealthMessage): IngestResult {
    return this.orch.engine.tx((t) => {
      const install = getInstall(this.db, orgId, installId);
      if (!install) throw new NotFoundError('install', installId);
      const component = getComponent(this.db, installId, msg.component_id);
      if (!component) throw new NotFoundError('component', msg.component_id);
      const event = { type: 'verdict', verdict: msg.verdict, ...(msg.reason ? { reason: msg.reason } : {}) };
      const c = advance(componentHealthMachine, component.health_state, component.health_ctx, event);
      if (!c.accepted) return 'ignored';
      const now = nowIso();
      setComponentHealth(this.db, component.component_id, c.state, c.context);
      for (const f of c.emitted as CHFact[]) {
        t.emit({
          kind: 'component_health',
          transition: f.type,
          org_id: orgId,
          time: now,
          install_id: installId,
          component_id: component.component_id,
          health: { verdict: f.verdict as Verdict, previous: f.previous, ...(f.reason ? { reason: f.reason } : {}) },
        });
      }
      const i = advance(installHealthMachine, install.health_state, install.health_ctx, { ...event, component_id: component.component_id });
      if (i.accepted) {
        setInstallHealth(this.db, installId, i.state, i.context);
        for (const f of i.emitted as IHFact[]) {
          t.emit({
            kind: 'install_health',
            transition: f.type,
            org_id: orgId,
            time: now,
            install_id: installId,
            health: { verdict: f.verdict as Verdict, previous: f.previous, component_id: f.component_id },
          });
        }
      }
      return c.changed || i.changed ? 'accepted' : 'duplicate';
    });
  }
}
