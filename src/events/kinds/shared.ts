// What several event kinds share: the workflow, step, outcome and approval parts of `data` with
// their schemas, the classification of workflow and step events, and the link and match targets of
// the kinds that are about a workflow; the runner kinds' data.
import { WORKFLOW_RESOURCES } from '../../domain/subscription.ts';
import { z } from 'zod';
import type {
  ApprovalFact,
  DriftFact,
  Fact,
  RunnerInactiveFact,
  RunnerUnhealthyFact,
  RunResult,
  StepFact,
  StepRef,
  WorkflowFact,
  WorkflowRef,
} from '../../domain/facts.ts';
import { rolloutSchema } from '../../domain/rollout.ts';
import { EXECUTION_TYPES, LIFECYCLE_TRANSITIONS, OWNER_TYPES, RUN_OUTCOMES } from '../../domain/status.ts';
import type { Classification, EventKind, FactOf, LinkTargets, MatchTargets } from './kind.ts';

export const present = (v: string | null | undefined): v is string => typeof v === 'string' && v.length > 0;

/** The first present value, else undefined. */
export function firstPresent(...vs: Array<string | null | undefined>): string | undefined {
  for (const v of vs) if (present(v)) return v;
  return undefined;
}

// ---- examples (the catalog's, CONTRACT 10.3) ----

/** The ids and time of the kinds' example facts: one install with one component, its sandbox, one runner, one webhook. */
export const EXAMPLE = {
  org: 'org_example',
  time: '2026-01-15T09:30:00.000Z',
  install: 'inst_example',
  component: 'cmp_example_api',
  sandbox: 'sbx_example',
  runner: { id: 'rnr_example', name: 'install runner', group_id: 'rgrp_example', group_type: 'install' },
  webhook: 'wh_example',
} as const;

/** The example's deploy workflow of the install, and its step that deploys the component. */
export const EXAMPLE_WORKFLOW: WorkflowRef = {
  id: 'wf_example_deploy',
  type: 'deploy_components',
  owner_id: EXAMPLE.install,
  owner_type: 'installs',
};
export const EXAMPLE_STEP: StepRef = {
  id: 'step_example_api',
  name: 'deploy api',
  idx: 1,
  target_type: 'install_deploys',
  target_id: 'dpl_example',
  component_id: EXAMPLE.component,
  sandbox_id: null,
  execution_type: 'system',
};

// ---- data ----

/** `data.links` (CONTRACT 6.2), built by links.ts from a kind's link targets. */
export const linksSchema = z.strictObject({
  org: z.string(),
  install: z.string().optional(),
  workflow: z.string().optional(),
  sandbox: z.string().optional(),
  component: z.string().optional(),
});

/** The schema of a kind's whole `data`: kind, transition, org_id, the kind's own fields, links. */
export function eventDataSchema<K extends string, T extends readonly [string, ...string[]], S extends z.ZodRawShape>(
  kind: K,
  transitions: T,
  shape: S,
) {
  return z.strictObject({ kind: z.literal(kind), transition: z.enum(transitions), org_id: z.string(), ...shape, links: linksSchema });
}

export const workflowDataSchema = z.strictObject({
  id: z.string(),
  type: z.string(),
  owner_id: z.string(),
  owner_type: z.enum(OWNER_TYPES),
});

export function workflowData(w: WorkflowRef): Record<string, unknown> {
  return { id: w.id, type: w.type, owner_id: w.owner_id, owner_type: w.owner_type };
}

/** Every step field of spec 6.5, in this order; a field the step does not have is null. */
const STEP_FIELDS = [
  'id',
  'name',
  'idx',
  'target_type',
  'target_id',
  'component_id',
  'sandbox_id',
  'execution_type',
] as const satisfies ReadonlyArray<keyof StepRef>;

export const stepDataSchema = z.strictObject({
  id: z.string(),
  name: z.string(),
  idx: z.number(),
  target_type: z.string().nullable(),
  target_id: z.string().nullable(),
  component_id: z.string().nullable(),
  sandbox_id: z.string().nullable(),
  execution_type: z.enum(EXECUTION_TYPES),
});

export function stepData(s: StepRef): Record<string, unknown> {
  return Object.fromEntries(STEP_FIELDS.map((k) => [k, s[k] ?? null]));
}

const outcomeDataSchema = z.strictObject({
  status: z.enum(RUN_OUTCOMES),
  duration_ms: z.number().int().nonnegative(),
  error: z.string().optional(),
});

function outcomeData(transition: 'succeeded' | 'failed' | 'cancelled', o: RunResult | undefined): Record<string, unknown> {
  const d = Number(o?.duration_ms);
  const out: Record<string, unknown> = {
    status: transition,
    duration_ms: Number.isFinite(d) && d > 0 ? Math.round(d) : 0,
  };
  if (transition === 'failed') out.error = o?.error && o.error.length > 0 ? o.error : 'failed';
  return out;
}

/** The fields of a workflow or step lifecycle event (`workflow`, `workflow_step`). */
export function lifecycleDataShape(step: boolean) {
  return {
    workflow: workflowDataSchema,
    parent: z.strictObject({ workflow_id: z.string(), step_id: z.string(), kind: z.literal('workflow_step') }).optional(),
    ...(step ? { step: stepDataSchema } : {}),
    action: z.strictObject({ id: z.string(), name: z.string() }).optional(),
    outcome: outcomeDataSchema.optional(),
    // a change window's wait step carries install_id, next_window_at and window_ids alone, no run_id (rollout.ts)
    rollout: z.strictObject({ ...rolloutSchema.shape, run_id: z.string().optional() }).optional(),
  };
}

export const LIFECYCLE = LIFECYCLE_TRANSITIONS;

export function lifecycleData(fact: WorkflowFact | StepFact): Record<string, unknown> {
  const d: Record<string, unknown> = {};
  d.workflow = workflowData(fact.workflow);
  if (fact.workflow.parent) {
    const p = fact.workflow.parent;
    d.parent = { workflow_id: p.workflow_id, step_id: p.step_id, kind: p.kind };
  }
  if (fact.kind === 'workflow_step') d.step = stepData(fact.step);
  if (fact.action) d.action = { id: fact.action.id, name: fact.action.name };
  if (fact.transition !== 'started') d.outcome = outcomeData(fact.transition, fact.outcome);
  if (fact.rollout) {
    const r = fact.rollout;
    // the fields it has, in the contract's order (a gate's trip; a deploy's failed installs)
    const ordered = {
      run_id: r.run_id,
      trigger: r.trigger,
      install_id: r.install_id,
      component_id: r.component_id,
      verdict: r.verdict,
      reason: r.reason,
      failed_installs: r.failed_installs,
      install_ids: r.install_ids,
      next_window_at: r.next_window_at,
      window_ids: r.window_ids,
    };
    d.rollout = Object.fromEntries(Object.entries(ordered).filter(([, v]) => v !== undefined));
  }
  return d;
}

/** The interest slug of a lifecycle event. */
export const lifecycleSlug = (fact: WorkflowFact | StepFact): string => `event:lifecycle.${fact.transition}`;

/** The outcome slugs of a lifecycle event: completion at its end, failures when it did not succeed. */
export function lifecycleOutcomes(fact: WorkflowFact | StepFact): string[] {
  if (fact.transition === 'started') return [];
  return fact.transition === 'succeeded' ? ['outcome:completion'] : ['outcome:completion', 'outcome:failures'];
}

/**
 * A workflow's or a step's lifecycle kind (workflow.ts, workflow_step.ts): both carry the same data
 * (the step's part for a step), interest slug, outcomes and match targets; the subject, the
 * classification and the links are each kind's own.
 */
export function lifecycleKind<K extends 'workflow' | 'workflow_step'>(
  kind: K,
  type: string,
  own: Pick<EventKind<FactOf<K>>, 'subject' | 'classify' | 'links' | 'catalog'>,
): EventKind<FactOf<K>> {
  return {
    kind: kind as FactOf<K>['kind'],
    type,
    subject: own.subject,
    data: {
      build: (f) => lifecycleData(f),
      schema: eventDataSchema(kind, LIFECYCLE, lifecycleDataShape(kind === 'workflow_step')),
    },
    slug: lifecycleSlug,
    // which resource a workflow's events have depends on the workflow's type: any of them
    routes: { resources: WORKFLOW_RESOURCES, events: LIFECYCLE.map((t) => `lifecycle.${t}`) },
    outcomes: lifecycleOutcomes,
    classify: own.classify,
    links: own.links,
    match: lifecycleMatch,
    catalog: own.catalog,
    orderKey: workflowOrderKey,
  };
}

// ---- runners (runner_unhealthy, runner_inactive) ----

/**
 * A runner's kind: its one transition names the subject's last part, the interest slug
 * (`event:runner.<transition>`) and the classification (`runners`, transition); the event is about
 * the runner's install. `reason`: whether `data.reason` is always there.
 */
export function runnerKind<K extends 'runner_inactive' | 'runner_unhealthy'>(
  kind: K,
  type: string,
  transition: string,
  reason: 'required' | 'optional',
  outcomes: readonly string[],
  catalog: EventKind<FactOf<K>>['catalog'],
): EventKind<FactOf<K>> {
  return {
    kind: kind as FactOf<K>['kind'],
    type,
    subject: (f: RunnerUnhealthyFact | RunnerInactiveFact) => `${f.org_id}/${kind}/${f.runner.id}/${transition}`,
    data: { build: runnerData, schema: runnerDataSchema(kind, transition, reason) },
    slug: () => `event:runner.${transition}`,
    routes: { resources: ['runners'], events: [`runner.${transition}`] },
    outcomes: () => [...outcomes],
    classify: () => c('runners', transition),
    links: (f) => ({ install: ownInstall(f) }),
    match: (f) => ({ install: ownInstall(f) }),
    catalog,
    // a runner's events are the runner's, whichever install it serves (CONTRACT 10.1)
    orderKey: (f: RunnerUnhealthyFact | RunnerInactiveFact) => f.runner.id,
  };
}

export function runnerData(f: RunnerUnhealthyFact | RunnerInactiveFact): Record<string, unknown> {
  const r = f.runner;
  const d: Record<string, unknown> = { runner: { id: r.id, name: r.name, group_id: r.group_id, group_type: r.group_type } };
  if (f.reason !== undefined) d.reason = f.reason;
  if (f.install_id) d.install_id = f.install_id;
  return d;
}

export function runnerDataSchema<K extends string, T extends string>(kind: K, transition: T, reason: 'required' | 'optional') {
  return eventDataSchema(kind, [transition], {
    runner: z.strictObject({ id: z.string(), name: z.string(), group_id: z.string(), group_type: z.string() }),
    reason: reason === 'required' ? z.string() : z.string().optional(),
    install_id: z.string().optional(),
  });
}

// ---- classification ----

export const c = (resource: string, op: string): Classification => ({ resource, op });

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

/** The workflow types whose own lifecycle events are delivered (CONTRACT 6.1), as a producer's warning names them. */
export const CLASSIFIED_WORKFLOW_TYPES: readonly string[] = Object.keys(WORKFLOW_CLASSES);

/** Classification of a workflow-level lifecycle event, by workflow type. */
export function classifyWorkflow(workflowType: string): Classification | null {
  if (DRIFT_WORKFLOW_TYPES.has(workflowType)) return null;
  const hit = Object.hasOwn(WORKFLOW_CLASSES, workflowType) ? WORKFLOW_CLASSES[workflowType] : undefined;
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

// ---- links and match ----

type AboutAWorkflow = WorkflowFact | StepFact | ApprovalFact | DriftFact;

/** The install an event about a workflow concerns: the workflow's owner install, else the fact's install. */
export function workflowInstall(fact: AboutAWorkflow): string | undefined {
  if (fact.workflow.owner_type === 'installs' && present(fact.workflow.owner_id)) return fact.workflow.owner_id;
  return firstPresent(fact.install_id);
}

/**
 * Link targets of an event about a workflow: its install, the workflow, and the sandbox and
 * component of its step (`step`), else those of the fact's scope.
 */
export function workflowLinks(fact: AboutAWorkflow, step: StepRef | undefined): LinkTargets {
  return {
    install: workflowInstall(fact),
    workflow: firstPresent(fact.workflow.id),
    sandbox: firstPresent(step?.sandbox_id, fact.sandbox_id),
    component: firstPresent(step?.component_id, fact.component_id),
  };
}

/** The ordering key of an event about a workflow (CONTRACT 10.1): its install when known, else the workflow. */
export function workflowOrderKey(fact: AboutAWorkflow): string {
  return workflowInstall(fact) ?? fact.workflow.id;
}

/** Match targets of a workflow or step lifecycle event: the install, the step's component, the action run's action. */
export function lifecycleMatch(fact: WorkflowFact | StepFact): MatchTargets {
  return {
    install: workflowInstall(fact),
    component: fact.kind === 'workflow_step' ? firstPresent(fact.step.component_id) : undefined,
    action: fact.action ? firstPresent(fact.action.id) : undefined,
  };
}

/** The install of a fact that names one directly (health, runners). */
export const ownInstall = (fact: Extract<Fact, { install_id?: string | null }>): string | undefined => firstPresent(fact.install_id);
