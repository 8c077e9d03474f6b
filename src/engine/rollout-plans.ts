// Branch runs and app rollbacks over install groups (CONTRACT 4.3): the config a run moves each
// install to, a group's plan for its approval step, the rollback steps a tripped gate adds and
// the error a tripped bake fails with. Reads only; the steps and facts are the engine's.
import { getConfig } from '../../store/apps.ts';
import { getComponent, getInstallById, type Install } from '../../store/installs.ts';
import type { StepRow, WorkflowRow } from '../../store/workflows.ts';
import type { Db } from '../../store/db.ts';
import type { GateTrip } from '../domain/rollout.ts';
import { batchSnapshotOf } from '../../machines/deploy-batch.ts';
import { rollbackGroupStep, type StepDef } from './definitions.ts';
import { diffConfigs } from '../domain/config-diff.ts';
import { runKindOf, windowScheduler } from './steps/window.ts';
import { configsBeforeOf, groupStepOf, runParamsOf } from './steps/state.ts';

/** The config a run (branch run or app rollback) moves an install to: its own target, else the run's one config. */
export function runTargetOf(wf: WorkflowRow, installId: string): string {
  const run = runParamsOf(wf);
  // a branch run has its one config, an app rollback a target per install
  return (run.targets?.[installId] ?? run.app_config_id) as string;
}

/** The plan of a group's approval step: per install, its current config, the run's target for it and the diff. */
export function groupPlan(db: Db, wf: WorkflowRow, step: StepRow, atMs: number): unknown {
  const installs = groupStepOf(step)
    .install_ids.map((id) => getInstallById(db, id))
    .filter((i): i is Install => !!i);
  const schedule = windowScheduler(db, String(wf.params.app_id), runKindOf(wf), atMs);
  return {
    install_group: step.params.group,
    installs: installs.map((i) => {
      const current = i.app_config_id ? getConfig(db, wf.org_id, i.app_config_id) : undefined;
      const target = getConfig(db, wf.org_id, runTargetOf(wf, i.install_id));
      return {
        install_id: i.install_id,
        install_name: i.name,
        labels: i.labels,
        old_app_config_id: i.app_config_id,
        new_app_config_id: target?.app_config_id ?? null,
        diff: diffConfigs(current?.body ?? null, target?.body ?? { components: [] }),
        ...schedule(i),
      };
    }),
  };
}

/**
 * When a run's group fails and it rolls back: a rollback step per group deployed, newest first,
 * back to the configs its installs had before the run; of a group whose deploy failed (over its
 * failure budget), the installs whose update started, whether it succeeded or failed.
 */
export function rollbackSteps(steps: StepRow[]): StepDef[] {
  const deploys = steps.filter(
    (s) =>
      s.params.kind === 'children' &&
      !s.params.rollback &&
      (s.status === 'succeeded' || (s.status === 'failed' && batchSnapshotOf(s.params))),
  );
  return deploys.reverse().flatMap((d) => {
    const before = configsBeforeOf(d);
    const started = d.status === 'failed' ? batchSnapshotOf(d.params)!.context.started.filter((id) => id in before) : Object.keys(before);
    if (!started.length) return [];
    return [rollbackGroupStep(String(d.params.group), started, Object.fromEntries(started.map((id) => [id, before[id]])))];
  });
}

/** outcome.error of a tripped bake: the install, the component, the verdict and its reason. */
export function tripError(db: Db, trip: GateTrip): string {
  const install = getInstallById(db, trip.install_id);
  const component = getComponent(db, trip.install_id, trip.component_id);
  const name = (n: string | undefined, id: string) => (n ? `${n} (${id})` : id);
  return (
    `health gate: install ${name(install?.name, trip.install_id)} component ${name(component?.name, trip.component_id)} ` +
    `is ${trip.verdict}: ${trip.reason ?? 'no reason given'}`
  );
}
