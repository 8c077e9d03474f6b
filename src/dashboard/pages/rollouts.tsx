// A rollout's page (branch runs and fleet rollbacks, CONTRACT 4.3): the run's steps grouped by
// install group (plan, deploy, bake, rollback), each bake with its time left on the engine's clock
// and the health of the group's installs, and the cause when the health gate tripped.
import type { Child } from 'hono/jsx';
import type { AppContext } from '../../context.ts';
import type { HealthGate, Rollout } from '../../domain/rollout.ts';
import { installView } from '../../services/installs.ts';
import { getConfig } from '../../../store/apps.ts';
import { getInstall, listComponents } from '../../../store/installs.ts';
import { getWorkflow, listChildWorkflows, listSteps, type StepRow } from '../../../store/workflows.ts';
import type { DashContext } from '../session.ts';
import { Status, Time } from '../ui.tsx';

/** The workflow types that are rollouts over install groups. */
export const ROLLOUT_TYPES = new Set(['app_branch_run', 'app_rollback']);

interface GateSnapshot {
  state: 'baking' | 'passed' | 'tripped';
  context: { ends_at: number; trip: Omit<Rollout, 'run_id' | 'trigger'> | null };
}

interface InstallHealth {
  install_id: string;
  name: string;
  /** the composite verdict (the worst of its components'), or unknown */
  health: string;
  /** components with a verdict other than healthy: name, verdict, reason */
  bad: Array<{ name: string; verdict: string; reason: string | null }>;
}

export interface RolloutGroup {
  name: string;
  install_ids: string[];
  step_ids: string[];
}

export interface RolloutData {
  /** the run's health gate (null: none) */
  gate: HealthGate | null;
  /** why the gate tripped (null: it has not) */
  trip: Rollout | null;
  /** `previous` or an app config id (fleet rollbacks); the app config (branch runs) */
  to: string | null;
  approval: 'per_group' | 'none';
  groups: RolloutGroup[];
  /** steps of no group (a branch run's build) */
  ungrouped: string[];
  rows: Map<string, StepRow>;
  /** the engine's clock now (ms) */
  now: number;
}

export function rolloutData(ctx: AppContext, workflowId: string): RolloutData | null {
  const wf = getWorkflow(ctx.db, workflowId);
  if (!wf || !ROLLOUT_TYPES.has(wf.type)) return null;
  const rows = listSteps(ctx.db, workflowId);
  const groups: RolloutGroup[] = [];
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
  const p = wf.params;
  return {
    gate: (p.health_gate as HealthGate | undefined) ?? null,
    trip: (p.rollout as Rollout | undefined) ?? null,
    to: typeof p.to === 'string' ? p.to : typeof p.app_config_id === 'string' ? p.app_config_id : null,
    approval: p.approval === 'none' ? 'none' : 'per_group',
    groups,
    ungrouped,
    rows: new Map(rows.map((r) => [r.step_id, r])),
    now: ctx.clock.now(),
  };
}

/** "9 min 30 s", "45 s", "1 h 5 min". */
export function span(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s} s`;
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const rest = s % 60;
  return h ? `${h} h ${m} min` : `${m} min${rest ? ` ${rest} s` : ''}`;
}

function installHealth(ctx: AppContext, orgId: string, installId: string): InstallHealth {
  const i = getInstall(ctx.db, orgId, installId);
  if (!i) return { install_id: installId, name: installId, health: 'unknown', bad: [] };
  const view = installView(ctx, i);
  const reasons = new Map(listComponents(ctx.db, installId).map((c) => [c.component_id, c.health_reason]));
  const bad = view.components.filter((c) => c.health !== 'healthy' && c.health !== 'unknown').map((c) => ({ name: c.name, verdict: c.health, reason: reasons.get(c.component_id) ?? null }));
  return { install_id: installId, name: i.name, health: view.health, bad };
}

const componentName = (ctx: AppContext, installId: string, componentId: string) => listComponents(ctx.db, installId, false).find((c) => c.component_id === componentId)?.name ?? componentId;

/** The cause of a tripped gate, at the top of the page. */
export const TripCause = ({ ctx, c, data }: { ctx: AppContext; c: DashContext; data: RolloutData }) => {
  const trip = data.trip;
  if (!trip) return null;
  const orgId = c.req.param('org')!;
  const install = getInstall(ctx.db, orgId, trip.install_id);
  const rollingBack = data.gate?.action === 'rollback';
  return (
    <section class="trip" aria-labelledby="h-trip" id="trip">
      <h2 id="h-trip">Health gate tripped</h2>
      <dl class="facts">
        <dt>Install</dt>
        <dd>
          {install ? <a href={c.get('paths').install(trip.install_id)}>{install.name}</a> : null} <span class="muted id">{trip.install_id}</span>
        </dd>
        <dt>Component</dt>
        <dd>
          {componentName(ctx, trip.install_id, trip.component_id)} <span class="muted id">{trip.component_id}</span>
        </dd>
        <dt>Verdict</dt>
        <dd>
          <Status status={trip.verdict} />
        </dd>
        <dt>Reason</dt>
        <dd>{trip.reason ?? <span class="muted">none given</span>}</dd>
        <dt>Then</dt>
        <dd>{rollingBack ? 'the run stopped, later groups were cancelled and the groups already deployed roll back to the configs they had before the run' : 'the run stopped and later groups were cancelled (halt)'}</dd>
      </dl>
    </section>
  );
};

/** The run's gate and target, for its details. */
export const RolloutFacts = ({ ctx, c, data }: { ctx: AppContext; c: DashContext; data: RolloutData }) => {
  const orgId = c.req.param('org')!;
  const cfg = data.to && data.to !== 'previous' ? getConfig(ctx.db, orgId, data.to) : undefined;
  return (
    <>
      <dt>To</dt>
      <dd>
        {data.to === 'previous' ? 'previous: each install to the config of its version before the current one' : cfg ? <>config v{cfg.version} <span class="muted id">{cfg.app_config_id}</span></> : (data.to ?? '—')}
      </dd>
      <dt>Approval</dt>
      <dd>{data.approval === 'none' ? 'none: groups deploy one after another' : "each group's plan is approved before it deploys"}</dd>
      <dt>Health gate</dt>
      <dd>
        {data.gate ? (
          <>
            bake <strong>{data.gate.bake}</strong> after each group deploys; trips on {data.gate.on.join(' or ')}; then <strong>{data.gate.action}</strong>
          </>
        ) : (
          'none'
        )}
      </dd>
    </>
  );
};

/** Under a bake step: its time left (or how it ended) and the health of the group's installs. */
const BakeDetail = ({ ctx, c, data, row, group }: { ctx: AppContext; c: DashContext; data: RolloutData; row: StepRow; group: RolloutGroup }) => {
  const orgId = c.req.param('org')!;
  const gate = row.params.gate as GateSnapshot | undefined;
  const bake = data.gate?.bake ?? '?';
  let state: Child;
  if (row.status === 'started' && gate) {
    state = (
      <p class="bake-left">
        Baking: <strong>{span(gate.context.ends_at - data.now)} left</strong> of {bake} (ends <Time iso={new Date(gate.context.ends_at).toISOString()} /> on the engine's clock)
      </p>
    );
  } else if (row.status === 'succeeded') {
    state = <p class="bake-left">Passed: no bad verdict during the {bake} bake.</p>;
  } else if (row.status === 'failed' && gate?.context.trip) {
    const t = gate.context.trip;
    state = (
      <p class="bake-left step-error">
        Tripped: install {installHealth(ctx, orgId, t.install_id).name}, component {componentName(ctx, t.install_id, t.component_id)} was {t.verdict}: {t.reason ?? 'no reason given'}.
      </p>
    );
  } else if (row.status === 'pending') {
    state = <p class="bake-left muted">Bakes for {bake} once the group has deployed.</p>;
  } else {
    state = <p class="bake-left muted">Did not bake.</p>;
  }
  const health = group.install_ids.map((id) => installHealth(ctx, orgId, id));
  return (
    <div class="bake">
      {state}
      {row.status === 'started' || row.status === 'failed' ? (
        <>
          <p>Verdicts of the group's installs now:</p>
          <ul class="verdicts">
            {health.map((h) => (
              <li>
                <a href={c.get('paths').install(h.install_id)}>{h.name}</a> <Status status={h.health} />
                {h.bad.length ? (
                  <ul>
                    {h.bad.map((b) => (
                      <li>
                        {b.name}: <Status status={b.verdict} /> {b.reason ?? ''}
                      </li>
                    ))}
                  </ul>
                ) : null}
              </li>
            ))}
          </ul>
        </>
      ) : null}
    </div>
  );
};

/** Under a deploy or rollback step: the install workflows it started. */
const ChildrenDetail = ({ ctx, c, row }: { ctx: AppContext; c: DashContext; row: StepRow }) => {
  const orgId = c.req.param('org')!;
  const children = listChildWorkflows(ctx.db, row.workflow_id, row.step_id);
  if (!children.length) return null;
  return (
    <ul class="children">
      {children.map((w) => {
        const i = getInstall(ctx.db, orgId, w.owner_id);
        return (
          <li>
            <a href={c.get('paths').install(w.owner_id)}>{i?.name ?? w.owner_id}</a>: <a href={c.get('paths').workflow(w.workflow_id)}>{w.type}</a> <Status status={w.status} />
          </li>
        );
      })}
    </ul>
  );
};

/** What goes under a step's card on a rollout's page. */
export function stepExtra(ctx: AppContext, c: DashContext, data: RolloutData, stepId: string): Child {
  const row = data.rows.get(stepId);
  if (!row) return null;
  const group = data.groups.find((g) => g.step_ids.includes(stepId));
  if (row.params.kind === 'bake' && group) return <BakeDetail ctx={ctx} c={c} data={data} row={row} group={group} />;
  if (row.params.kind === 'children') return <ChildrenDetail ctx={ctx} c={c} row={row} />;
  return null;
}

/** A group's status in words: how far it got. */
export function groupStatus(data: RolloutData, g: RolloutGroup): string {
  const rows = g.step_ids.map((id) => data.rows.get(id)!);
  const rolledBack = rows.find((r) => r.params.rollback);
  if (rolledBack) return rolledBack.status === 'succeeded' ? 'rolled back' : rolledBack.status === 'failed' ? 'rollback failed' : 'rolling back';
  if (rows.some((r) => r.status === 'failed')) return 'failed';
  if (rows.every((r) => r.status === 'succeeded' || r.status === 'skipped')) return 'succeeded';
  if (rows.some((r) => r.status === 'awaiting_approval')) return 'awaiting approval';
  if (rows.some((r) => r.status === 'started')) return rows.find((r) => r.status === 'started')!.params.kind === 'bake' ? 'baking' : 'deploying';
  if (rows.every((r) => r.status === 'cancelled' || r.status === 'pending')) return rows.some((r) => r.status === 'cancelled') ? 'cancelled' : 'pending';
  return 'in progress';
}
