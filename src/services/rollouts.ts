// A rollout as people follow it (branch runs and fleet rollbacks, CONTRACT 4.3): the run's steps
// grouped by install group, each step's kind and gate (parsed from its params), the health of
// the group's installs, the install workflows a deploy started and the cause of a tripped gate,
// named. The dashboard's rollout page renders it.
import { z } from 'zod';
import type { AppContext } from '../context.ts';
import { gateSnapshotOf, gateSnapshotSchema } from '../../machines/health-gate.ts';
import { verifySnapshotOf, verifySnapshotSchema } from '../../machines/verification-gate.ts';
import { shownUrl, verificationsOf } from '../domain/verification.ts';
import { gateTripOf, gateTripSchema, healthGateSchema, rolloutParamsOf, rolloutPolicySchema, rolloutSchema } from '../domain/rollout.ts';
import { findBranch, getConfig, listBranches } from '../../store/apps.ts';
import { listChangeWindows } from '../../store/change-windows.ts';
import type { BakeVerdict } from '../engine/steps/bake.ts';
import { getInstall, listComponents } from '../../store/installs.ts';
import {
  getWorkflow,
  listChildWorkflows,
  listOwnerWorkflows,
  listRecentWorkflows as listRecentOrgWorkflows,
  listSteps,
  type StepRow,
} from '../../store/workflows.ts';
import { installView } from './installs.ts';
import { statusSchema, type WorkflowSummary } from '../schemas/workflows.ts';
import { workflowSummary } from './workflows.ts';

/** The workflow types that are rollouts over install groups. */
export const ROLLOUT_TYPES = new Set(['app_branch_run', 'app_rollback']);

const installHealthSchema = z.object({
  install_id: z.string(),
  /** the install's name (its id when it is gone) */
  name: z.string(),
  /** the composite verdict (the worst of its components'), or unknown */
  health: z.string(),
  /** components with a verdict other than healthy: name, verdict, reason */
  bad: z.array(z.object({ name: z.string(), verdict: z.string(), reason: z.string().nullable() })),
});
export type InstallHealth = z.infer<typeof installHealthSchema>;

const rolloutStepSchema = z.object({
  step_id: z.string(),
  status: statusSchema,
  /** bake, children (a deploy or a rollback), approval, job */
  kind: z.string().nullable(),
  rollback: z.boolean(),
  /** a bake's gate once it has begun */
  gate: gateSnapshotSchema.nullable(),
  /** a verify step's gate once it has begun: per URL (shown without query or secret) its requests and last answer */
  verify: verifySnapshotSchema.nullable().default(null),
  /** the name of the component that tripped the gate (its id when unknown) */
  trip_component_name: z.string().nullable(),
  /** a children step's install workflows */
  children: z.array(
    z.object({
      workflow_id: z.string(),
      type: z.string(),
      status: statusSchema,
      install_id: z.string(),
      install_name: z.string().nullable(),
    }),
  ),
  /** a `wait for change window` step's install, its next window and the windows holding it */
  window: z
    .object({ install_id: z.string(), next_window_at: z.string().nullable(), window_ids: z.array(z.string()) })
    .nullable()
    .default(null),
  /** a wait step's windows by name (the id when the window is gone), and since when it waited (ms, engine clock) */
  window_names: z.array(z.string()).default([]),
  waiting_since: z.number().nullable().default(null),
  /** when the step started and ended (ISO 8601), null before */
  started_at: z.string().nullable().default(null),
  finished_at: z.string().nullable().default(null),
  /** a bake's verdicts seen during it (each change of an install's composite verdict, the latest 50), named */
  verdicts: z
    .array(
      z.object({
        at: z.number(),
        install_id: z.string(),
        install_name: z.string(),
        component_name: z.string(),
        verdict: z.string(),
        reason: z.string().nullable(),
      }),
    )
    .default([]),
  /**
   * a verify step's answers, one per request (the latest 50): which URL (index), the request's number, verdict, status, error, reason,
   * when (ms)
   */
  answers: z
    .array(
      z.object({
        index: z.number(),
        attempt: z.number().nullable(),
        at: z.number(),
        verdict: z.string(),
        status: z.number().nullable(),
        error: z.string().nullable(),
        reason: z.string().nullable(),
      }),
    )
    .default([]),
});
export type RolloutStep = z.infer<typeof rolloutStepSchema>;

const rolloutGroupSchema = z.object({
  name: z.string(),
  install_ids: z.array(z.string()),
  step_ids: z.array(z.string()),
  /** the health of the group's installs now */
  health: z.array(installHealthSchema),
});
export type RolloutGroup = z.infer<typeof rolloutGroupSchema>;

export const rolloutViewSchema = z.object({
  /** the run's health gate (null: none) */
  gate: healthGateSchema.nullable(),
  /** the run's verification gates: each URL as it may be shown (no query, no secret), whether it is signed, its timing */
  verification: z
    .array(
      z.object({
        shown: z.string(),
        signed: z.boolean(),
        interval: z.string(),
        timeout: z.string(),
        max_wait: z.string(),
        failure_limit: z.number(),
      }),
    )
    .default([]),
  /** the run's rollout policy (null: none: each group at once, its first failure fails it) */
  policy: rolloutPolicySchema.nullable(),
  /** why the gate tripped (null: it has not), with the install's and component's names */
  trip: z
    .object({ run_id: z.string(), ...gateTripSchema.shape, install_name: z.string().nullable(), component_name: z.string() })
    .nullable(),
  /** the run's rollout record (null: no group failed): why its group failed, the installs that failed */
  rollout: rolloutSchema.nullable(),
  /** `previous` or an app config id (fleet rollbacks); the app config (branch runs) */
  to: z.string().nullable(),
  /** the version of the config `to` names, when it is one of the org's */
  to_version: z.number().int().nullable(),
  approval: z.enum(['per_group', 'none']),
  groups: z.array(rolloutGroupSchema),
  /** steps of no group (a branch run's build) */
  ungrouped: z.array(z.string()),
  steps: z.array(rolloutStepSchema),
  /** the engine's clock now (ms) */
  now: z.number(),
});
export type RolloutView = z.infer<typeof rolloutViewSchema>;

function installHealth(ctx: AppContext, orgId: string, installId: string): InstallHealth {
  const i = getInstall(ctx.db, orgId, installId);
  if (!i) return { install_id: installId, name: installId, health: 'unknown', bad: [] };
  const view = installView(ctx, i);
  const reasons = new Map(listComponents(ctx.db, installId).map((c) => [c.component_id, c.health_reason]));
  const bad = view.components
    .filter((c) => c.health !== 'healthy' && c.health !== 'unknown')
    .map((c) => ({ name: c.name, verdict: c.health, reason: reasons.get(c.component_id) ?? null }));
  return { install_id: installId, name: i.name, health: view.health, bad };
}

/** A component's name, removed ones too (its id when unknown). */
const componentName = (ctx: AppContext, installId: string, componentId: string) =>
  listComponents(ctx.db, installId, false).find((c) => c.component_id === componentId)?.name ?? componentId;

function rolloutStep(ctx: AppContext, orgId: string, s: StepRow): RolloutStep {
  const children = s.params.kind === 'children' ? listChildWorkflows(ctx.db, s.workflow_id, s.step_id) : [];
  const gate = gateSnapshotOf(s.params) ?? null;
  const trip = gate?.context.trip;
  return {
    step_id: s.step_id,
    status: s.status,
    kind: typeof s.params.kind === 'string' ? s.params.kind : null,
    rollback: !!s.params.rollback,
    gate,
    verify: verifySnapshotOf(s.params) ?? null,
    trip_component_name: trip ? componentName(ctx, trip.install_id, trip.component_id) : null,
    children: children.map((w) => ({
      workflow_id: w.workflow_id,
      type: w.type,
      status: w.status,
      install_id: w.owner_id,
      install_name: getInstall(ctx.db, orgId, w.owner_id)?.name ?? null,
    })),
    window: s.params.kind === 'window' ? (s.params.window as RolloutStep['window']) : null,
    window_names: s.params.kind === 'window' ? windowNames(ctx, orgId, s) : [],
    waiting_since: s.params.kind === 'window' && typeof s.params.since_ms === 'number' ? s.params.since_ms : null,
    started_at: s.started_at,
    finished_at: s.finished_at,
    verdicts: bakeVerdicts(ctx, orgId, s),
    answers: Array.isArray(s.params.verify_answers)
      ? (s.params.verify_answers as RolloutStep['answers']).map((a) => ({
          ...a,
          status: a.status ?? null,
          error: a.error ?? null,
          reason: a.reason ?? null,
          attempt: a.attempt ?? null,
        }))
      : [],
  };
}

/** The names of the windows holding a wait step's install (a window's id when it is gone). */
function windowNames(ctx: AppContext, orgId: string, s: StepRow): string[] {
  const ids = ((s.params.window as RolloutStep['window'])?.window_ids ?? []) as string[];
  const wf = getWorkflow(ctx.db, s.workflow_id);
  const appId = wf?.type === 'app_rollback' ? wf.owner_id : wf ? findBranch(ctx.db, orgId, wf.owner_id)?.app_id : undefined;
  const names = new Map(appId ? listChangeWindows(ctx.db, appId).map((w) => [w.window_id, w.name]) : []);
  return ids.map((id) => names.get(id) ?? id);
}

/** A bake's verdicts as it kept them (params.bake_verdicts), with install and component names. */
function bakeVerdicts(ctx: AppContext, orgId: string, s: StepRow): RolloutStep['verdicts'] {
  if (!Array.isArray(s.params.bake_verdicts)) return [];
  return (s.params.bake_verdicts as BakeVerdict[]).map((v) => ({
    at: v.at,
    install_id: v.install_id,
    install_name: getInstall(ctx.db, orgId, v.install_id)?.name ?? v.install_id,
    component_name: componentName(ctx, v.install_id, v.component_id),
    verdict: v.verdict,
    reason: v.reason,
  }));
}

/** Groups by name in step order, each with its installs (the union of its steps'). */
function groupsOf(rows: StepRow[]): { groups: Array<Omit<RolloutGroup, 'health'>>; ungrouped: string[] } {
  const groups: Array<Omit<RolloutGroup, 'health'>> = [];
  const ungrouped: string[] = [];
  for (const s of rows) {
    const name = typeof s.params.group === 'string' ? s.params.group : null;
    if (name === null) {
      ungrouped.push(s.step_id);
      continue;
    }
    let g = groups.find((x) => x.name === name);
    if (!g) groups.push((g = { name, install_ids: [], step_ids: [] }));
    g.step_ids.push(s.step_id);
    for (const id of (s.params.install_ids as string[] | undefined) ?? []) if (!g.install_ids.includes(id)) g.install_ids.push(id);
  }
  return { groups, ungrouped };
}

/** The rollout view of an org's workflow; null when it is not a rollout. */
export function rolloutView(ctx: AppContext, orgId: string, workflowId: string): RolloutView | null {
  const wf = getWorkflow(ctx.db, workflowId);
  if (!wf || wf.org_id !== orgId || !ROLLOUT_TYPES.has(wf.type)) return null;
  const rows = listSteps(ctx.db, workflowId);
  const { groups, ungrouped } = groupsOf(rows);
  const p = wf.params;
  const { gate, rollout, policy } = rolloutParamsOf(p);
  const trip = gateTripOf(rollout);
  const to = typeof p.to === 'string' ? p.to : typeof p.app_config_id === 'string' ? p.app_config_id : null;
  const cfg = to && to !== 'previous' ? getConfig(ctx.db, orgId, to) : undefined;
  return {
    gate,
    verification: verificationsOf(p).map((v) => ({
      shown: shownUrl(v.url),
      signed: v.secret !== null,
      interval: v.interval,
      timeout: v.timeout,
      max_wait: v.max_wait,
      failure_limit: v.failure_limit,
    })),
    policy,
    trip:
      trip && rollout
        ? {
            run_id: rollout.run_id,
            ...trip,
            install_name: getInstall(ctx.db, orgId, trip.install_id)?.name ?? null,
            component_name: componentName(ctx, trip.install_id, trip.component_id),
          }
        : null,
    rollout,
    to,
    to_version: cfg?.version ?? null,
    approval: p.approval === 'none' ? 'none' : 'per_group',
    groups: groups.map((g) => ({ ...g, health: g.install_ids.map((id) => installHealth(ctx, orgId, id)) })),
    ungrouped,
    steps: rows.map((s) => rolloutStep(ctx, orgId, s)),
    now: ctx.clock.now(),
  };
}

/** An app's rollouts, newest first (at most `limit`): its fleet rollbacks and its branches' runs, with the branches' names. */
/** A recent workflow's owner as a person reads it: an install, or a rollout of an app (its branch named). */
export type RecentOwner =
  | { kind: 'install'; install_id: string }
  | { kind: 'rollout'; app_id: string; branch: string | null; fleet: boolean };

/**
 * The org's `limit` newest workflows of its installs and its rollouts (branch runs and fleet
 * rollbacks) with their owners: one read however many installs and apps the org has (CONTRACT §8).
 */
export function listRecentWorkflows(
  ctx: AppContext,
  orgId: string,
  limit: number,
): Array<{ workflow: WorkflowSummary; owner: RecentOwner }> {
  return listRecentOrgWorkflows(ctx.db, orgId, [...ROLLOUT_TYPES], limit).map((w) => {
    if (w.owner_type === 'installs') return { workflow: workflowSummary(w), owner: { kind: 'install', install_id: w.owner_id } };
    const branch = w.owner_type === 'app_branches' ? findBranch(ctx.db, orgId, w.owner_id) : undefined;
    const appId = branch?.app_id ?? String(w.params.app_id ?? w.owner_id);
    return {
      workflow: workflowSummary(w),
      owner: {
        kind: 'rollout',
        app_id: appId,
        branch: branch?.name ?? (w.owner_type === 'app_branches' ? w.owner_id : null),
        fleet: w.type === 'app_rollback',
      },
    };
  });
}

export function listAppRollouts(
  ctx: AppContext,
  orgId: string,
  appId: string,
  limit: number,
): { rollouts: WorkflowSummary[]; branchNames: Map<string, string> } {
  const branches = listBranches(ctx.db, appId);
  const rollouts = [appId, ...branches.map((b) => b.app_branch_id)]
    .flatMap((owner) => listOwnerWorkflows(ctx.db, orgId, owner))
    .filter((w) => ROLLOUT_TYPES.has(w.type))
    .map(workflowSummary)
    .sort((a, b) => (a.created_at < b.created_at ? 1 : a.created_at > b.created_at ? -1 : 0))
    .slice(0, limit);
  return { rollouts, branchNames: new Map(branches.map((b) => [b.app_branch_id, b.name])) };
}
