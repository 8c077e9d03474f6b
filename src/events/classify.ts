// Classification of a fact into the (resource, op) pair of CONTRACT 6.1 / 6.2.
// null means the event is never delivered to webhooks (drift workflow lifecycle, unknown workflow
// types whose step target type does not classify them). Ping has no classification: it is sent
// only by the ping endpoint, bypassing interests.
import type { Fact, StepRef } from '../domain/facts.ts';

export interface Classification {
  resource: string;
  op: string;
}

const c = (resource: string, op: string): Classification => ({ resource, op });

/** Workflow types whose lifecycle events (and their steps') are never delivered. */
export const DRIFT_WORKFLOW_TYPES: ReadonlySet<string> = new Set(['drift_run', 'drift_run_reprovision_sandbox']);

const WORKFLOW_CLASSES: Readonly<Record<string, Classification>> = {
  provision: c('installs', 'provision'),
  deprovision: c('installs', 'deprovision'),
  reprovision: c('installs', 'reprovision'),
  manual_deploy: c('components', 'deploy'),
  deploy_components: c('components', 'deploy'),
  app_config_update: c('components', 'deploy'),
  teardown_component: c('components', 'teardown'),
  reprovision_sandbox: c('sandboxes', 'reprovision'),
  deprovision_sandbox: c('sandboxes', 'deprovision'),
  input_update: c('install_configurations', 'inputs'),
  sync_secrets: c('install_configurations', 'secrets'),
  action_workflow_run: c('actions', 'run'),
  provision_runner: c('runners', 'provision'),
  reprovision_runner: c('runners', 'reprovision'),
  app_branch_run: c('app_branches', 'run'),
  // a fleet rollback is a rollout across installs like a branch run (CONTRACT 6.1 does not list it)
  app_rollback: c('app_branches', 'run'),
};

/** Classification of a workflow-level lifecycle event, by workflow type. */
export function classifyWorkflow(workflowType: string): Classification | null {
  if (DRIFT_WORKFLOW_TYPES.has(workflowType)) return null;
  const hit = Object.prototype.hasOwnProperty.call(WORKFLOW_CLASSES, workflowType) ? WORKFLOW_CLASSES[workflowType] : undefined;
  return hit ? { ...hit } : null;
}

/** Classification of a step event (also used for approvals), by target type then workflow type. */
export function classifyStep(workflowType: string, step: Pick<StepRef, 'name' | 'target_type'>): Classification | null {
  if (DRIFT_WORKFLOW_TYPES.has(workflowType)) return null;
  if (workflowType === 'app_branch_run' || workflowType === 'app_rollback') return c('app_branches', 'run');
  switch (step.target_type ?? null) {
    case 'install_sandbox_runs':
      if (workflowType === 'provision') return c('sandboxes', 'provision');
      if (workflowType === 'deprovision' || workflowType === 'deprovision_sandbox') return c('sandboxes', 'deprovision');
      return c('sandboxes', 'reprovision');
    case 'install_deploys':
      if (step.name.startsWith('teardown ') || workflowType === 'teardown_component' || workflowType === 'deprovision') {
        return c('components', 'teardown');
      }
      return c('components', 'deploy');
    case 'install_action_workflow_runs':
      return c('actions', 'run');
    case 'install_stack_versions':
      return c('stacks', 'version_active');
    case 'runners':
      if (workflowType === 'provision' || workflowType === 'provision_runner') return c('runners', 'provision');
      return c('runners', 'reprovision');
    default:
      return classifyWorkflow(workflowType);
  }
}

export function classify(fact: Fact): Classification | null {
  switch (fact.kind) {
    case 'workflow':
      return classifyWorkflow(fact.workflow.type);
    case 'workflow_step':
    case 'workflow_step_approval':
      return classifyStep(fact.workflow.type, fact.step);
    case 'drift_detected': {
      if (fact.drift.component_id) return c('components', 'drift');
      if (fact.drift.sandbox_id) return c('sandboxes', 'drift');
      // fall back on what the scan was about
      if (fact.workflow.type === 'drift_run_reprovision_sandbox' || fact.step.sandbox_id || fact.step.target_type === 'install_sandbox_runs') {
        return c('sandboxes', 'drift');
      }
      return c('components', 'drift');
    }
    case 'component_health':
      return c('components', 'health');
    case 'install_health':
      return c('installs', 'health');
    case 'runner_unhealthy':
      return c('runners', 'unhealthy');
    case 'runner_inactive':
      return c('runners', 'inactive');
    case 'webhook_ping':
      return null;
    case 'webhook_delivery':
      return c('webhooks', 'delivery');
    default:
      return null;
  }
}
