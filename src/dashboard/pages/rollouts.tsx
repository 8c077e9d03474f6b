// A rollout's page (branch runs and fleet rollbacks, CONTRACT 4.3): the run's steps grouped by
// install group (plan, deploy, bake, rollback), each bake with its time left on the engine's clock
// and the health of the group's installs, and the cause when the health gate tripped.
import type { Child } from 'hono/jsx';
import type { RolloutGroup, RolloutStep, RolloutView } from '../../services/rollouts.ts';
import type { DashContext } from '../session.ts';
import { Fact, Status, Time } from '../ui.tsx';

/** "9 min 30 s", "45 s", "1 h 5 min". */
export function span(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s} s`;
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const rest = s % 60;
  return h ? `${h} h ${m} min` : `${m} min${rest ? ` ${rest} s` : ''}`;
}

/** The cause of a tripped gate, at the top of the page. */
export const TripCause = ({ c, data }: { c: DashContext; data: RolloutView }) => {
  const trip = data.trip;
  if (!trip) return null;
  const rollingBack = data.gate?.action === 'rollback';
  return (
    <section class="trip" aria-labelledby="h-trip" id="trip">
      <h2 id="h-trip">Health gate tripped</h2>
      <dl class="facts">
        <Fact term="Install">
          {trip.install_name !== null ? <a href={c.get('paths').install(trip.install_id)}>{trip.install_name}</a> : null} <span class="muted id">{trip.install_id}</span>
        </Fact>
        <Fact term="Component">
          {trip.component_name} <span class="muted id">{trip.component_id}</span>
        </Fact>
        <Fact term="Verdict">
          <Status status={trip.verdict} />
        </Fact>
        <Fact term="Reason">{trip.reason ?? <span class="muted">none given</span>}</Fact>
        <Fact term="Then">{rollingBack ? 'the run stopped, later groups were cancelled and the groups already deployed roll back to the configs they had before the run' : 'the run stopped and later groups were cancelled (halt)'}</Fact>
      </dl>
    </section>
  );
};

/** The run's gate and target, for its details. */
export const RolloutFacts = ({ data }: { data: RolloutView }) => {
  const cfg = data.to && data.to_version !== null ? { app_config_id: data.to, version: data.to_version } : undefined;
  return (
    <>
      <Fact term="To">
        {data.to === 'previous' ? 'previous: each install to the config of its version before the current one' : cfg ? <>config v{cfg.version} <span class="muted id">{cfg.app_config_id}</span></> : (data.to ?? '—')}
      </Fact>
      <Fact term="Approval">{data.approval === 'none' ? 'none: groups deploy one after another' : "each group's plan is approved before it deploys"}</Fact>
      <Fact term="Health gate">
        {data.gate ? (
          <>
            bake <strong>{data.gate.bake}</strong> after each group deploys; trips on {data.gate.on.join(' or ')}
            {data.gate.for_ms > 0 ? <> that lasts <strong>{data.gate.for}</strong></> : null}; then <strong>{data.gate.action}</strong>
          </>
        ) : (
          'none'
        )}
      </Fact>
    </>
  );
};

/** Under a bake step: its time left (or how it ended) and the health of the group's installs. */
const BakeDetail = ({ c, data, row, group }: { c: DashContext; data: RolloutView; row: RolloutStep; group: RolloutGroup }) => {
  const gate = row.gate;
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
        Tripped: install {group.health.find((h) => h.install_id === t.install_id)?.name ?? t.install_id}, component {row.trip_component_name} was {t.verdict}: {t.reason ?? 'no reason given'}.
      </p>
    );
  } else if (row.status === 'pending') {
    state = <p class="bake-left muted">Bakes for {bake} once the group has deployed.</p>;
  } else {
    state = <p class="bake-left muted">Did not bake.</p>;
  }
  const health = group.health;
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
const ChildrenDetail = ({ c, row }: { c: DashContext; row: RolloutStep }) => {
  const children = row.children;
  if (!children.length) return null;
  return (
    <ul class="children">
      {children.map((w) => {
        return (
          <li>
            <a href={c.get('paths').install(w.install_id)}>{w.install_name ?? w.install_id}</a>: <a href={c.get('paths').workflow(w.workflow_id)}>{w.type}</a> <Status status={w.status} />
          </li>
        );
      })}
    </ul>
  );
};

/** What goes under a step's card on a rollout's page. */
export function stepExtra(c: DashContext, data: RolloutView, stepId: string): Child {
  const row = data.steps.find((s) => s.step_id === stepId);
  if (!row) return null;
  const group = data.groups.find((g) => g.step_ids.includes(stepId));
  if (row.kind === 'bake' && group) return <BakeDetail c={c} data={data} row={row} group={group} />;
  if (row.kind === 'children') return <ChildrenDetail c={c} row={row} />;
  return null;
}

/** A group's status in words: how far it got. */
export function groupStatus(data: RolloutView, g: RolloutGroup): string {
  const rows = data.steps.filter((s) => g.step_ids.includes(s.step_id));
  const rolledBack = rows.find((r) => r.rollback);
  if (rolledBack) return rolledBack.status === 'succeeded' ? 'rolled back' : rolledBack.status === 'failed' ? 'rollback failed' : 'rolling back';
  if (rows.some((r) => r.status === 'failed')) return 'failed';
  if (rows.every((r) => r.status === 'succeeded' || r.status === 'skipped')) return 'succeeded';
  if (rows.some((r) => r.status === 'awaiting_approval')) return 'awaiting approval';
  if (rows.some((r) => r.status === 'started')) return rows.find((r) => r.status === 'started')!.kind === 'bake' ? 'baking' : 'deploying';
  if (rows.every((r) => r.status === 'cancelled' || r.status === 'pending')) return rows.some((r) => r.status === 'cancelled') ? 'cancelled' : 'pending';
  return 'in progress';
}
