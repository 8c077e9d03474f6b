// Config rollback (spec 4, CONTRACT 4.3): version history, diffs, app config updates and branch runs.
import type { AppContext } from '../context.ts';
import { ConflictError, InvalidError, NotFoundError } from '../domain/errors.ts';
import { windowScheduler } from '../engine/steps/window.ts';
import { runAtOnce, runInTurns } from '../engine/turns.ts';
import type { HealthGate, RolloutPolicy } from '../domain/rollout.ts';
import type { Verification } from '../domain/verification.ts';
import { getBranch, getConfig, listBranches, type AppConfig, type InstallGroup } from '../../store/apps.ts';
import { listAppInstalls, type Install } from '../../store/installs.ts';
import { getVersion, listVersions, previousVersion, type VersionRow } from '../../store/workflows.ts';
import { planFor, refuseVetoed } from '../engine/config-apply.ts';
import type { RunGroup } from '../engine/definitions.ts';
import { diffConfigs } from '../domain/config-diff.ts';
import { matchAdmits } from '../dispatch/match.ts';
import { mustGetApp } from './catalog.ts';
import { checkPolicyTokens } from './approval-policies.ts';
import type { ApprovalPolicy } from '../domain/approval-policy.ts';
import type { Actor } from '../domain/scopes.ts';
import { mustGetInstall } from './installs.ts';

function versionView(ctx: AppContext, v: VersionRow) {
  const cfg = getConfig(ctx.db, v.org_id, v.app_config_id);
  return {
    version_id: v.version_id,
    install_id: v.install_id,
    version: v.version,
    app_config_id: v.app_config_id,
    app_config: cfg ? { app_config_id: cfg.app_config_id, version: cfg.version, ...cfg.body } : null,
    old_app_config_id: v.old_app_config_id,
    workflow_id: v.workflow_id,
    status: v.status,
    created_at: v.created_at,
  };
}

export function listInstallVersions(ctx: AppContext, orgId: string, installId: string) {
  mustGetInstall(ctx, orgId, installId);
  return listVersions(ctx.db, installId).map((v) => versionView(ctx, v));
}

export function versionDiff(ctx: AppContext, orgId: string, installId: string, versionId: string) {
  mustGetInstall(ctx, orgId, installId);
  const v = getVersion(ctx.db, installId, versionId);
  if (!v) throw new NotFoundError('app config version', versionId);
  const fromId = v.old_app_config_id ?? previousVersion(ctx.db, installId, v.version)?.app_config_id ?? null;
  const from = fromId ? getConfig(ctx.db, orgId, fromId) : undefined;
  const to = getConfig(ctx.db, orgId, v.app_config_id);
  return {
    version_id: v.version_id,
    from_app_config_id: fromId,
    to_app_config_id: v.app_config_id,
    ...diffConfigs(from?.body ?? null, to?.body ?? { components: [] }),
  };
}

function configOf(ctx: AppContext, orgId: string, appId: string, appConfigId: string, path: string): AppConfig {
  const cfg = getConfig(ctx.db, orgId, appConfigId);
  if (!cfg) throw new NotFoundError('app config', appConfigId);
  if (cfg.app_id !== appId)
    throw new InvalidError(`app config ${appConfigId} belongs to another app`, [{ path, message: 'config of another app' }]);
  return cfg;
}

const configOfApp = (ctx: AppContext, orgId: string, appId: string, appConfigId: string) =>
  configOf(ctx, orgId, appId, appConfigId, 'app_config_id');

/** POST app-config-updates: the plan only, or an `app_config_update` workflow and a new version. */
export function updateInstallConfig(
  ctx: AppContext,
  orgId: string,
  installId: string,
  body: { app_config_id: string; plan_only?: boolean },
) {
  const install = mustGetInstall(ctx, orgId, installId);
  const target = configOfApp(ctx, orgId, install.app_id, body.app_config_id);
  const fromId = install.app_config_id;
  const withIds = (plan: ReturnType<typeof planFor>) => ({
    from_app_config_id: fromId,
    to_app_config_id: target.app_config_id,
    ...plan,
    ...(target.vetoed ? { vetoed: target.vetoed } : {}),
  });
  if (body.plan_only) return { status: 200 as const, body: { plan: withIds(planFor(ctx.db, install, target)), applied: false as const } };
  refuseVetoed(target);
  const r = ctx.engine.applyConfig(install, target);
  return {
    status: 201 as const,
    body: { plan: withIds(r.plan), applied: true as const, workflow_id: r.workflow.workflow_id, version_id: r.version.version_id },
  };
}

/** POST branch runs: an `app_branch_run` workflow over the branch's install groups (CONTRACT 4.3). */
export function startBranchRun(
  ctx: AppContext,
  orgId: string,
  appId: string,
  branchId: string,
  body: {
    app_config_id: string;
    skip_builds?: boolean;
    health_gate?: HealthGate;
    rollout?: RolloutPolicy;
    verification?: Verification[];
    approval_policy?: ApprovalPolicy;
  },
  startedBy: Actor | null = null,
) {
  mustGetApp(ctx, orgId, appId);
  if (body.approval_policy) checkPolicyTokens(ctx, orgId, body.approval_policy, 'approval_policy.');
  const branch = getBranch(ctx.db, orgId, appId, branchId);
  if (!branch) throw new NotFoundError('app branch', branchId);
  const target = configOfApp(ctx, orgId, appId, body.app_config_id);
  refuseVetoed(target);
  const installs = listAppInstalls(ctx.db, appId);
  const groups = branch.install_groups.map((g) => ({
    name: g.name,
    install_ids: installs.filter((i) => inGroup(g, i)).map((i) => i.install_id),
  }));
  const wf = ctx.engine.startBranchRun(
    orgId,
    appId,
    branchId,
    target,
    groups,
    !!body.skip_builds,
    body.health_gate ?? null,
    body.rollout ?? null,
    body.verification ?? [],
    { policy: body.approval_policy ?? null, started_by: startedBy },
  );
  // a branch run is its workflow: run_id names the same thing (there is nothing else to look up)
  return {
    run_id: wf.workflow_id,
    workflow_id: wf.workflow_id,
    app_branch_id: branchId,
    app_config_id: target.app_config_id,
    status: wf.status,
  };
}

/** Whether an install group takes an install: listed in its install_ids or matching its selector (CONTRACT 4.3). */
function inGroup(g: Pick<InstallGroup, 'install_ids' | 'selector'>, i: Install): boolean {
  if ((g.install_ids ?? []).includes(i.install_id)) return true;
  return g.selector ? matchAdmits({ installs: { selector: g.selector } }, { install: { id: i.install_id, labels: i.labels } }) : false;
}

/** The body of POST /v1/apps/{app_id}/rollbacks (validated by src/schemas/rollbacks.ts fleetRollbackSchema). */
export interface FleetRollbackInput {
  to: string;
  install_ids?: string[];
  selector?: { match_labels: Record<string, string> };
  plan_only?: boolean;
  health_gate?: HealthGate;
  rollout?: RolloutPolicy;
  verification?: Verification[];
  approval?: 'per_group' | 'none';
  /** a stricter approval policy for the run's approval steps (CONTRACT 10.4) */
  approval_policy?: ApprovalPolicy;
}

/** The group that installs in no group of the app's branches form, last (CONTRACT 4.3). */
export const OTHER_GROUP = 'other';

/**
 * The plan of a fleet rollback: per install (in group order) the move and its diff, and the
 * installs left out with why; and the groups the run goes through.
 *
 * Its cost is linear in the app's installs (CONTRACT §8: a plan of 1,000 installs under 50 change
 * windows answers within 1 s, holding the engine as little as can be): each config is read and
 * parsed once, each diff (from a config, to a config) computed once however many installs share it,
 * the change windows laid out once (windowScheduler), and an install's previous version read with
 * one indexed lookup each, not its whole history. It yields every PLAN_SLICE installs (src/engine/
 * turns.ts): a plan_only answer is worked out in turns, other orgs served between them.
 */
function* fleetRollbackPlan(ctx: AppContext, orgId: string, appId: string, body: FleetRollbackInput) {
  const fixed = body.to === 'previous' ? null : configOf(ctx, orgId, appId, body.to, 'to');
  const all = listAppInstalls(ctx.db, appId);
  const known = new Set(all.map((x) => x.install_id));
  (body.install_ids ?? []).forEach((id, i) => {
    if (!known.has(id)) {
      throw new InvalidError(`install ${id} is not an install of app ${appId}`, [
        { path: `install_ids.${i}`, message: 'not an install of this app' },
      ]);
    }
  });
  const chosen =
    body.install_ids || body.selector ? all.filter((i) => inGroup({ install_ids: body.install_ids, selector: body.selector }, i)) : all;

  // groups as the app's branches group installs (oldest branch first, its groups in order; an install in the first that takes it)
  const groupOf = new Map<string, string>();
  const order: string[] = [];
  for (const b of listBranches(ctx.db, appId).reverse()) {
    for (const g of b.install_groups) {
      if (!order.includes(g.name)) order.push(g.name);
      const ids = new Set(g.install_ids ?? []);
      for (const [n, i] of all.entries()) {
        if (n % PLAN_SLICE === PLAN_SLICE - 1) yield;
        if (!groupOf.has(i.install_id) && (ids.has(i.install_id) || inGroup({ selector: g.selector }, i)))
          groupOf.set(i.install_id, g.name);
      }
    }
  }
  if (!order.includes(OTHER_GROUP)) order.push(OTHER_GROUP);

  const configs = new Map<string, AppConfig | undefined>();
  const config = (id: string) => {
    if (!configs.has(id)) configs.set(id, getConfig(ctx.db, orgId, id));
    return configs.get(id);
  };
  const diffs = new Map<string, ReturnType<typeof diffConfigs>>();
  const diffOf = (fromId: string | null, target: AppConfig) => {
    const key = `${fromId}>${target.app_config_id}`;
    let d = diffs.get(key);
    if (!d) diffs.set(key, (d = diffConfigs((fromId ? config(fromId)?.body : null) ?? null, target.body)));
    return d;
  };

  const skipped: Array<{ install_id: string; reason: string }> = [];
  const moves: Array<{ install: Install; target: AppConfig; group: string }> = [];
  for (const [n, install] of chosen.entries()) {
    if (n % PLAN_SLICE === PLAN_SLICE - 1) yield;
    let target: AppConfig | null | undefined = fixed;
    if (!install.app_config_id) {
      skipped.push({ install_id: install.install_id, reason: 'no app config applied yet' });
      continue;
    }
    if (!target) {
      // its newest version, then the one before it: two indexed lookups, whatever its history holds
      const current = previousVersion(ctx.db, install.install_id, Number.MAX_SAFE_INTEGER);
      const before = current && previousVersion(ctx.db, install.install_id, current.version);
      if (!before) {
        skipped.push({ install_id: install.install_id, reason: 'no earlier version' });
        continue;
      }
      target = config(before.app_config_id);
      if (!target) {
        skipped.push({
          install_id: install.install_id,
          reason: `app config ${before.app_config_id} of its earlier version no longer exists`,
        });
        continue;
      }
    }
    if (target.app_config_id === install.app_config_id) {
      skipped.push({ install_id: install.install_id, reason: `already on app config ${target.app_config_id} (version ${target.version})` });
      continue;
    }
    moves.push({ install, target, group: groupOf.get(install.install_id) ?? OTHER_GROUP });
  }
  const movesOf = new Map<string, typeof moves>();
  for (const m of moves) {
    const list = movesOf.get(m.group);
    if (list) list.push(m);
    else movesOf.set(m.group, [m]);
  }
  const groups: RunGroup[] = order
    .filter((name) => movesOf.has(name))
    .map((name) => ({ name, install_ids: movesOf.get(name)!.map((m) => m.install.install_id) }));
  const byGroup = groups.flatMap((g) => movesOf.get(g.name)!);
  const schedule = windowScheduler(ctx.db, appId, 'rollback', ctx.clock.now());
  const installs = [];
  for (const [n, m] of byGroup.entries()) {
    if (n % PLAN_SLICE === PLAN_SLICE - 1) yield;
    installs.push({
      install_id: m.install.install_id,
      install_name: m.install.name,
      labels: m.install.labels,
      install_group: m.group,
      old_app_config_id: m.install.app_config_id,
      new_app_config_id: m.target.app_config_id,
      diff: diffOf(m.install.app_config_id, m.target),
      ...schedule(m.install),
      ...(m.target.vetoed ? { vetoed: m.target.vetoed } : {}),
    });
  }
  return { moves: byGroup, groups, plan: { installs, skipped } };
}

/** Installs a plan works through between two chances to pause. */
const PLAN_SLICE = 50;

/**
 * POST /v1/apps/{app_id}/rollbacks (CONTRACT 4.3): the plan only, or an `app_rollback` workflow
 * over the selected installs, grouped as the app's branches group them, each group planned
 * (approval unless `approval: "none"`), deployed and, with a health gate, baked.
 */
export function rollBackFleet(ctx: AppContext, orgId: string, appId: string, body: FleetRollbackInput, startedBy: Actor | null = null) {
  mustGetApp(ctx, orgId, appId);
  if (body.approval_policy && !body.plan_only) checkPolicyTokens(ctx, orgId, body.approval_policy, 'approval_policy.');
  const { moves, groups, plan } = runAtOnce(fleetRollbackPlan(ctx, orgId, appId, body));
  if (body.plan_only) return { status: 200 as const, body: { plan, applied: false as const } };
  const vetoed = moves.find((m) => m.target.vetoed);
  if (vetoed) refuseVetoed(vetoed.target);
  if (!moves.length)
    throw new ConflictError(
      `nothing to roll back: ${plan.skipped.map((s) => `${s.install_id} (${s.reason})`).join(', ') || 'the selection has no installs'}`,
    );
  const targets = Object.fromEntries(moves.map((m) => [m.install.install_id, m.target.app_config_id]));
  const wf = ctx.engine.startAppRollback(orgId, appId, groups, targets, {
    to: body.to,
    approval: body.approval !== 'none',
    gate: body.health_gate ?? null,
    policy: body.rollout ?? null,
    verification: body.verification ?? [],
    runApproval: { policy: body.approval_policy ?? null, started_by: startedBy },
  });
  // a fleet rollback is its workflow: run_id names the same thing
  return {
    status: 201 as const,
    body: { run_id: wf.workflow_id, workflow_id: wf.workflow_id, status: wf.status, plan, applied: true as const },
  };
}

/**
 * The plan of a fleet rollback (plan_only), worked out in turns of the engine's thread (a plan of
 * 1,000 installs takes tens of milliseconds; other orgs are served between its turns). It changes
 * nothing; installs changed while it runs show as they were when it reached them.
 */
export async function planFleetRollbackInTurns(ctx: AppContext, orgId: string, appId: string, body: FleetRollbackInput) {
  mustGetApp(ctx, orgId, appId);
  const { plan } = await runInTurns(fleetRollbackPlan(ctx, orgId, appId, { ...body, plan_only: true }));
  return { status: 200 as const, body: { plan, applied: false as const } };
}
