// Workflow definitions: the steps of each workflow type, in order (CONTRACT 4.2).
import type { ExecutionType } from '../domain/status.ts';
import type { Component, Action, Install } from '../../store/installs.ts';

export type Operation =
  | 'sandbox.provision'
  | 'sandbox.reprovision'
  | 'sandbox.deprovision'
  | 'component.deploy'
  | 'component.teardown'
  | 'component.plan'
  | 'sandbox.plan'
  | 'action.run'
  | 'build'
  | 'inputs.update'
  | 'secrets.sync'
  | 'stack.version'
  | 'runner.provision';

/** How a step runs: a job for a runner, an approval, child workflows, a health gate's bake, or a verification gate. */
export type DefinedStepKind = 'job' | 'approval' | 'children' | 'bake' | 'verify';

export interface StepDef {
  name: string;
  target_type: string | null;
  target_id?: string | null;
  component_id?: string | null;
  sandbox_id?: string | null;
  action_id?: string | null;
  execution_type: ExecutionType;
  kind: DefinedStepKind;
  operation?: Operation;
  /** which runner gets the job: the install's or the org's */
  runner?: 'install' | 'org';
  params?: Record<string, unknown>;
}

const sandboxStep = (install: Install, verb: 'provision' | 'reprovision' | 'deprovision' | 'plan'): StepDef => ({
  name: `${verb} sandbox`,
  target_type: 'install_sandbox_runs',
  sandbox_id: install.sandbox_id,
  execution_type: 'system',
  kind: 'job',
  operation: `sandbox.${verb}` as Operation,
  runner: 'install',
});

const componentStep = (c: Pick<Component, 'component_id' | 'name'>, verb: 'deploy' | 'teardown' | 'plan'): StepDef => ({
  name: `${verb} ${c.name}`,
  target_type: 'install_deploys',
  component_id: c.component_id,
  execution_type: 'system',
  kind: 'job',
  operation: `component.${verb}` as Operation,
  runner: 'install',
});

/** A job of the install's runner about the install as a whole (no target). */
const installJob = (name: string, operation: Operation): StepDef => ({
  name,
  target_type: null,
  execution_type: 'system',
  kind: 'job',
  operation,
  runner: 'install',
});

/** Install workflows the API starts by type (CONTRACT 4.2); provision and app_config_update have their own operations. */
export type InstallWorkflowType =
  | 'reprovision'
  | 'deprovision'
  | 'manual_deploy'
  | 'teardown_component'
  | 'reprovision_sandbox'
  | 'deprovision_sandbox'
  | 'action_workflow_run'
  | 'drift_run'
  | 'drift_run_reprovision_sandbox'
  | 'input_update'
  | 'sync_secrets';

export interface InstallStepsInput {
  install: Install;
  components: Component[];
  component?: Component;
  action?: Action;
  /** app_config_update: what changed */
  update?: { sandboxChanged: boolean; removed: Component[]; deploy: Component[] };
}

/** The steps of an install workflow type. */
export function installSteps(type: string, i: InstallStepsInput): StepDef[] {
  const { install, components } = i;
  switch (type) {
    case 'provision':
      return [runnerStep(install, 'provision'), sandboxStep(install, 'provision'), ...components.map((c) => componentStep(c, 'deploy'))];
    case 'reprovision':
      return [sandboxStep(install, 'reprovision'), ...components.map((c) => componentStep(c, 'deploy'))];
    case 'deprovision':
      return [...[...components].reverse().map((c) => componentStep(c, 'teardown')), sandboxStep(install, 'deprovision')];
    case 'manual_deploy':
      return [componentStep(need(i.component), 'deploy')];
    case 'teardown_component':
      return [componentStep(need(i.component), 'teardown')];
    case 'reprovision_sandbox':
      return [sandboxStep(install, 'reprovision')];
    case 'deprovision_sandbox':
      return [sandboxStep(install, 'deprovision')];
    case 'action_workflow_run': {
      const a = need(i.action);
      return [
        {
          name: `run ${a.name}`,
          target_type: 'install_action_workflow_runs',
          action_id: a.action_id,
          execution_type: 'system',
          kind: 'job',
          operation: 'action.run',
          runner: 'install',
        },
      ];
    }
    case 'drift_run':
      return components.map((c) => componentStep(c, 'plan'));
    case 'drift_run_reprovision_sandbox':
      return [sandboxStep(install, 'plan')];
    case 'input_update':
      return [installJob('update inputs', 'inputs.update')];
    case 'sync_secrets':
      return [installJob('sync secrets', 'secrets.sync')];
    case 'provision_runner':
      return [runnerStep(install, 'provision')];
    case 'reprovision_runner':
      return [runnerStep(install, 'reprovision')];
    case 'app_config_update': {
      const u = need(i.update);
      return [
        ...(u.sandboxChanged ? [sandboxStep(install, 'reprovision')] : []),
        ...u.removed.map((c) => componentStep(c, 'teardown')),
        ...u.deploy.map((c) => componentStep(c, 'deploy')),
      ];
    }
    default:
      throw new Error(`unknown workflow type ${type}`);
  }
}

function runnerStep(install: Install, verb: 'provision' | 'reprovision'): StepDef {
  return {
    name: `${verb} runner`,
    target_type: 'runners',
    target_id: install.runner_id,
    execution_type: 'system',
    kind: 'job',
    operation: 'runner.provision',
    runner: 'org',
  };
}

/** An install group of a run: its name and its installs, in order. */
export interface RunGroup {
  name: string;
  install_ids: string[];
}

/**
 * Per group: its plan (an approval step, unless approvals are off), its deploy, with verifications
 * their gate, and with a health gate its bake.
 */
function groupSteps(groups: RunGroup[], opts: { approval: boolean; gate: boolean; verify?: boolean }): StepDef[] {
  const steps: StepDef[] = [];
  for (const g of groups) {
    const empty = g.install_ids.length === 0;
    const params = { group: g.name, install_ids: g.install_ids };
    /** One of the group's steps: `<verb> install group: <name>`, skipped when the group has no installs. */
    const step = (verb: string, kind: DefinedStepKind, execution_type: ExecutionType): StepDef => ({
      name: `${verb} install group: ${g.name}`,
      target_type: null,
      execution_type: empty ? 'skipped' : execution_type,
      kind,
      params,
    });
    if (opts.approval) steps.push(step('plan', 'approval', 'approval'));
    steps.push(step('deploy', 'children', 'system'));
    if (opts.verify) steps.push(step('verify', 'verify', 'system'));
    if (opts.gate) steps.push(step('bake', 'bake', 'system'));
  }
  return steps;
}

/** The steps of an app branch run (CONTRACT 4.3). */
export function branchRunSteps(groups: RunGroup[], skipBuilds: boolean, gate = false, verify = false): StepDef[] {
  return [
    {
      name: 'build components',
      target_type: null,
      execution_type: skipBuilds ? 'skipped' : 'system',
      kind: 'job',
      operation: 'build',
      runner: 'org',
    },
    ...groupSteps(groups, { approval: true, gate, verify }),
  ];
}

/** The steps of an app rollback (CONTRACT 4.3): no build; each group planned (unless approvals are off), deployed, baked. */
export function appRollbackSteps(groups: RunGroup[], opts: { approval: boolean; gate: boolean; verify?: boolean }): StepDef[] {
  return groupSteps(groups, opts);
}

/** A step added to a run whose gate tripped with `action: "rollback"`: a deployed group back to its configs before the run. */
export function rollbackGroupStep(group: string, installIds: string[], targets: Record<string, string>): StepDef {
  return {
    name: `rollback install group: ${group}`,
    target_type: null,
    execution_type: 'system',
    kind: 'children',
    params: { group, install_ids: installIds, targets, rollback: true },
  };
}

function need<T>(v: T | undefined): T {
  if (v === undefined) throw new Error('workflow definition input missing');
  return v;
}
