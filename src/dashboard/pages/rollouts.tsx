// A rollout's page (branch runs and fleet rollbacks, CONTRACT 4.3): the run's steps grouped by
// install group (plan, deploy, bake, rollback), each bake with its time left on the engine's clock
// and the health of the group's installs, and the cause when the health gate tripped.
import type { Child } from 'hono/jsx';
import type { RolloutGroup, RolloutStep, RolloutView } from '../../services/rollouts.ts';
import type { DashContext } from '../session.ts';
import { FactLine, StatusBadge, Time } from '../ui.tsx';
import type { VerifyAnswer } from '../../domain/verification.ts';

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
        <FactLine term="Install">
          {trip.install_name !== null ? <a href={c.get('paths').install(trip.install_id)}>{trip.install_name}</a> : null}{' '}
          <span class="muted id">{trip.install_id}</span>
        </FactLine>
        <FactLine term="Component">
          {trip.component_name} <span class="muted id">{trip.component_id}</span>
        </FactLine>
        <FactLine term="Verdict">
          <StatusBadge status={trip.verdict} />
        </FactLine>
        <FactLine term="Reason">{trip.reason ?? <span class="muted">none given</span>}</FactLine>
        <FactLine term="Then">
          {rollingBack
            ? 'the run stopped, later groups were cancelled and the groups already deployed roll back ' +
              'to the configs they had before the run'
            : 'the run stopped and later groups were cancelled (halt)'}
        </FactLine>
      </dl>
    </section>
  );
};

/** What an install is in a run, as the run's picture colours it. */
export type InstallState = 'waiting' | 'waiting for window' | 'running' | 'succeeded' | 'failed' | 'rolling back' | 'rolled back';
const STATE_FILL: Record<InstallState, string> = {
  waiting: '#d0d5dd',
  // held by a change window (CONTRACT 4.3): a wait step of its group is started
  'waiting for window': '#7c3aed',
  running: '#3b82f6',
  succeeded: '#16a34a',
  failed: '#dc2626',
  'rolling back': '#f59e0b',
  'rolled back': '#b45309',
};

/** Each install of a group and its state: its rollback's child if any, else its deploy's, else waiting. */
export function installStates(
  data: RolloutView,
  g: RolloutGroup,
): Array<{ install_id: string; name: string; state: InstallState; deploy_failed: boolean }> {
  const rows = data.steps.filter((s) => g.step_ids.includes(s.step_id) && s.kind === 'children');
  const deploy = rows.find((r) => !r.rollback);
  const rollback = rows.find((r) => r.rollback);
  const held = new Set(
    data.steps
      .filter((s) => g.step_ids.includes(s.step_id) && s.kind === 'window' && s.status === 'started')
      .map((s) => s.window!.install_id),
  );
  return g.install_ids.map((id) => {
    const back = rollback?.children.find((w) => w.install_id === id);
    const fwd = deploy?.children.find((w) => w.install_id === id);
    const name = g.health.find((h) => h.install_id === id)?.name ?? fwd?.install_name ?? id;
    // its update failed (what the failure budget counts), whether it was rolled back since or not
    const deployFailed = fwd?.status === 'failed' || fwd?.status === 'cancelled';
    let state: InstallState = held.has(id) ? 'waiting for window' : 'waiting';
    if (back) state = back.status === 'succeeded' ? 'rolled back' : back.status === 'failed' ? 'failed' : 'rolling back';
    else if (fwd) state = fwd.status === 'succeeded' ? 'succeeded' : deployFailed ? 'failed' : 'running';
    return { install_id: id, name, state, deploy_failed: deployFailed };
  });
}

/**
 * The whole run at a glance (server-rendered SVG): a row per group, a cell per install coloured by
 * its state, and the group's failures against its budget.
 */
export const RunPicture = ({ data }: { data: RolloutView }) => {
  if (!data.groups.length) return null;
  const CELL = 18;
  const GAP = 4;
  const LABEL = 130;
  const rows = data.groups.map((g) => ({ g, states: installStates(data, g) }));
  const widest = Math.max(1, ...rows.map((r) => r.states.length));
  const budgetX = LABEL + widest * (CELL + GAP) + 12;
  // each verification's last answer, per group, right of the budget
  const verifyX = budgetX + 140;
  const checksOf = (g: RolloutGroup) => verifyChecks(data, g);
  const mostChecks = Math.max(0, ...rows.map((r) => checksOf(r.g).length));
  const legend = Object.keys(STATE_FILL) as InstallState[];
  // each legend entry: a swatch and its label (about 6.2 px a character at 11 px)
  const legendX = legend.map((_, n) => legend.slice(0, n).reduce((x, s) => x + 30 + Math.ceil(s.length * 6.2), 0));
  const width = Math.max(
    budgetX + 200,
    verifyX + mostChecks * VERIFY_W,
    legendX[legend.length - 1] + 30 + Math.ceil(legend[legend.length - 1].length * 6.2),
  );
  const height = rows.length * (CELL + 10) + 34;
  const pct = data.policy?.max_failed_pct ?? 0;
  const summary = rows
    .map(
      (r) =>
        `${r.g.name}: ${
          legend
            .map((s) => [s, r.states.filter((x) => x.state === s).length] as const)
            .filter(([, n]) => n)
            .map(([s, n]) => `${n} ${s}`)
            .join(', ') || 'no installs'
        }${checksOf(r.g)
          .map((v) => `, verification ${v.shown} ${verifyWord(v)}`)
          .join('')}`,
    )
    .join('; ');
  return (
    <section aria-labelledby="h-picture" class="run-picture">
      <h2 id="h-picture">The run at a glance</h2>
      <svg
        role="img"
        aria-label={`Installs by group: ${summary}`}
        width={width}
        height={height}
        viewBox={`0 0 ${width} ${height}`}
        xmlns="http://www.w3.org/2000/svg"
      >
        {rows.map(({ g, states }, i) => {
          const y = i * (CELL + 10);
          const failed = states.filter((s) => s.deploy_failed).length;
          const allowed = Math.floor((g.install_ids.length * pct) / 100);
          return (
            <g>
              <text x={0} y={y + CELL - 4} font-size="13" fill="#1f2937">
                {g.name.length > 16 ? `${g.name.slice(0, 15)}…` : g.name}
              </text>
              {states.map((s, n) => (
                <rect x={LABEL + n * (CELL + GAP)} y={y} width={CELL} height={CELL} rx={3} fill={STATE_FILL[s.state]}>
                  <title>{`${s.name}: ${s.state}`}</title>
                </rect>
              ))}
              <text x={budgetX} y={y + CELL - 4} font-size="12" fill={failed > allowed ? '#b91c1c' : '#4b5563'}>
                {`${failed} failed, budget ${allowed}`}
              </text>
              {checksOf(g).map((v, n) => (
                <g class="verification">
                  <circle cx={verifyX + n * VERIFY_W + 7} cy={y + CELL / 2} r={6} fill={VERDICT_FILL[v.last?.verdict ?? 'none']} />
                  <text x={verifyX + n * VERIFY_W + 17} y={y + CELL - 4} font-size="11" fill="#374151">
                    {`${hostOf(v.shown)} ${v.last ? `${v.last.verdict} #${v.attempt}` : verifyWord(v)}`}
                  </text>
                  <title>{verifyTitle(v)}</title>
                </g>
              ))}
            </g>
          );
        })}
        {legend.map((s, n) => (
          <g>
            <rect x={legendX[n]} y={height - 16} width={12} height={12} rx={2} fill={STATE_FILL[s]} />
            <text x={legendX[n] + 16} y={height - 6} font-size="11" fill="#374151">
              {s}
            </text>
          </g>
        ))}
      </svg>
    </section>
  );
};

/** Width of one verification's answer in the run's picture. */
const VERIFY_W = 250;
/** A verification's last answer, as the picture colours it (none: not asked yet). */
const VERDICT_FILL: Record<VerifyAnswer['verdict'] | 'none', string> = {
  pass: '#16a34a',
  fail: '#dc2626',
  pending: '#3b82f6',
  error: '#f59e0b',
  none: '#d0d5dd',
};

type VerifyCheck = NonNullable<RolloutStep['verify']>['context']['checks'][number];

/** The verifications of a group's verify step (none before it began). */
function verifyChecks(data: RolloutView, g: RolloutGroup): VerifyCheck[] {
  return data.steps.find((s) => g.step_ids.includes(s.step_id) && s.kind === 'verify')?.verify?.context.checks ?? [];
}

/** A verification's URL in the picture: host and path without the scheme, its middle cut when long. */
const hostOf = (shown: string) => {
  const s = shown.replace(/^https?:\/\//, '');
  return s.length > 26 ? `${s.slice(0, 11)}…${s.slice(-14)}` : s;
};

/** "pass (3 requests)", "pending (2 requests)", "not asked yet". */
function verifyWord(v: VerifyCheck): string {
  if (!v.last) return v.attempt ? 'asking' : 'not asked yet';
  return `${v.last.verdict} (${v.attempt} request${v.attempt === 1 ? '' : 's'})`;
}

function verifyTitle(v: VerifyCheck): string {
  if (!v.last) return `${v.shown}: ${verifyWord(v)}`;
  const l = v.last;
  const detail = [l.status !== null ? `HTTP ${l.status}` : null, l.error, l.reason].filter(Boolean).join(', ');
  return `${v.shown}: ${l.verdict}${detail ? ` (${detail})` : ''} at ${l.at}, request ${v.attempt}, ${v.failures} failure(s) in a row`;
}

/** Under a verify step: each URL's last answer and when it is asked next. */
const VerifyDetail = ({ data, row }: { data: RolloutView; row: RolloutStep }) => {
  const checks = row.verify?.context.checks ?? [];
  if (!checks.length) return <p class="muted">Asks each verification URL once the group has deployed.</p>;
  const started = row.started_at ? Date.parse(row.started_at) : null;
  return (
    <>
      <ul class="verifications">
        {checks.map((v) => (
          <li>
            {v.shown}: <strong>{verifyWord(v)}</strong>
            {v.last?.status != null ? ` HTTP ${v.last.status}` : ''}
            {v.last?.error ? ` ${v.last.error}` : ''}
            {v.last?.reason ? ` reason: ${v.last.reason}` : ''}
            {row.status === 'started' && !v.passed ? <span class="muted">{` next request in ${span(v.next_at - data.now)}`}</span> : null}
          </li>
        ))}
      </ul>
      {row.answers.length ? (
        <>
          <p>Each request's answer{row.answers.length >= 50 ? ' (the latest 50)' : ''}:</p>
          <ol class="verify-answers">
            {row.answers.map((a) => (
              <li>
                {started !== null ? `+${span(a.at - started)} ` : ''}
                {checks[a.index]?.shown ?? `verification ${a.index + 1}`}
                {a.attempt !== null ? ` request ${a.attempt}` : ''}: <strong>{a.verdict}</strong>
                {a.status !== null ? ` HTTP ${a.status}` : ''}
                {a.error ? ` ${a.error}` : ''}
                {a.reason ? ` reason: ${a.reason}` : ''}
              </li>
            ))}
          </ol>
        </>
      ) : null}
    </>
  );
};

/** The run's gate and target, for its details. */
export const RolloutFacts = ({ data }: { data: RolloutView }) => {
  const cfg = data.to && data.to_version !== null ? { app_config_id: data.to, version: data.to_version } : undefined;
  return (
    <>
      <FactLine term="To">
        {data.to === 'previous' ? (
          'previous: each install to the config of its version before the current one'
        ) : cfg ? (
          <>
            config v{cfg.version} <span class="muted id">{cfg.app_config_id}</span>
          </>
        ) : (
          (data.to ?? '—')
        )}
      </FactLine>
      <FactLine term="Approval">
        {data.approval === 'none' ? 'none: groups deploy one after another' : "each group's plan is approved before it deploys"}
      </FactLine>
      <FactLine term="Rollout">
        {data.policy ? (
          <>
            {data.policy.max_parallel ? (
              <>
                <strong>{data.policy.max_parallel}</strong> install(s) of a group at a time
              </>
            ) : (
              'every install of a group at once'
            )}
            ; a group fails when more than <strong>{data.policy.max_failed_pct} %</strong> of its installs fail
            {data.policy.on_failure ? (
              <>
                ; then <strong>{data.policy.on_failure}</strong>
              </>
            ) : null}
          </>
        ) : (
          'every install of a group at once; its first failure fails it'
        )}
      </FactLine>
      {data.verification.length ? (
        <FactLine term="Verification">
          after each group deploys, until each passes:{' '}
          {data.verification.map((v, n) => (
            <>
              {n ? '; ' : ''}
              {v.shown} (every <strong>{v.interval}</strong>, timeout {v.timeout}, at most {v.max_wait}, {v.failure_limit} failure(s) in a
              row{v.signed ? ', signed' : ''})
            </>
          ))}
        </FactLine>
      ) : null}
      <FactLine term="Health gate">
        {data.gate ? (
          <>
            bake <strong>{data.gate.bake}</strong> after each group deploys; trips on {data.gate.on.join(' or ')}
            {data.gate.for_ms > 0 ? (
              <>
                {' '}
                that lasts <strong>{data.gate.for}</strong>
              </>
            ) : null}
            ; then <strong>{data.gate.action}</strong>
          </>
        ) : (
          'none'
        )}
      </FactLine>
    </>
  );
};

/** A bad verdict's streak in a bake: an install's verdicts in the gate's `on` from one component, until another verdict ended it. */
interface Streak {
  /** index in row.verdicts of its first verdict */
  first: number;
  start: number;
  /** when it ended (null: still running at `now`) */
  end: number | null;
  lasted: number;
  tripped: boolean;
}

/** The bad streaks of a bake, from the verdicts it saw (the gate's rule: CONTRACT 4.3 `for`). */
function streaksOf(row: RolloutStep, now: number): Streak[] {
  const on = (row.gate?.context.on ?? []) as string[];
  const trip = row.gate?.context.trip ?? null;
  const bakeEnd = row.finished_at ? Date.parse(row.finished_at) : null;
  const out: Streak[] = [];
  row.verdicts.forEach((v, i) => {
    if (!on.includes(v.verdict)) return;
    const p =
      row.verdicts
        .slice(0, i)
        .filter((x) => x.install_id === v.install_id)
        .pop() ?? null;
    if (p && on.includes(p.verdict) && p.component_name === v.component_name) return; // continues a streak
    const ender = row.verdicts
      .slice(i + 1)
      .find((n) => n.install_id === v.install_id && !(on.includes(n.verdict) && n.component_name === v.component_name));
    const end = ender?.at ?? null;
    const until = end ?? bakeEnd ?? now;
    const tripped = !!trip && trip.install_id === v.install_id && end === null && row.status === 'failed';
    out.push({ first: i, start: v.at, end, lasted: Math.max(0, until - v.at), tripped });
  });
  return out;
}

/** Under a bake: each verdict it saw, how long it lasted, and what the gate made of it. */
const BakeVerdicts = ({ data, row }: { data: RolloutView; row: RolloutStep }) => {
  if (!row.verdicts.length) return null;
  const started = row.started_at ? Date.parse(row.started_at) : row.verdicts[0].at;
  const bakeEnd = row.finished_at ? Date.parse(row.finished_at) : null;
  const on = (row.gate?.context.on ?? []) as string[];
  const forMs = row.gate?.context.for_ms ?? 0;
  const streaks = new Map(streaksOf(row, data.now).map((x) => [x.first, x]));
  const verdictOf = (i: number): Child => {
    const v = row.verdicts[i];
    const s = streaks.get(i);
    if (!on.includes(v.verdict)) return <span class="muted">not a verdict the gate trips on</span>;
    if (!s) return <span class="muted">the same bad streak goes on</span>;
    if (s.tripped)
      return (
        <strong class="step-error">
          tripped the gate
          {forMs ? `: bad for ${span(s.lasted)}, as long as the gate's for (${span(forMs)})` : ': the gate trips at once (no for)'}
        </strong>
      );
    if (s.end !== null)
      return (
        <span class="tolerated">
          tolerated by the gate's <code>for</code> ({span(forMs)}): bad for {span(s.lasted)}, it ended before lasting {span(forMs)}
        </span>
      );
    if (row.status === 'started')
      return (
        <span>
          bad for {span(s.lasted)} so far; trips once it lasts {span(forMs)}
        </span>
      );
    return <span>bad for {span(s.lasted)}</span>;
  };
  return (
    <>
      <p>Verdicts seen during the bake{row.verdicts.length >= 50 ? ' (the latest 50 changes)' : ''}:</p>
      <table class="bake-verdicts">
        <thead>
          <tr>
            <th scope="col">From</th>
            <th scope="col">Install</th>
            <th scope="col">Component</th>
            <th scope="col">Verdict</th>
            <th scope="col">Lasted</th>
            <th scope="col">Gate</th>
          </tr>
        </thead>
        <tbody>
          {row.verdicts.map((v, i) => {
            const next = row.verdicts.slice(i + 1).find((n) => n.install_id === v.install_id);
            const until = next?.at ?? bakeEnd ?? data.now;
            const lasted = span(Math.max(0, until - v.at));
            return (
              <tr class="bake-verdict" data-verdict={v.verdict}>
                <td>
                  +{span(Math.max(0, v.at - started))}{' '}
                  <span class="muted">
                    <Time iso={new Date(v.at).toISOString()} />
                  </span>
                </td>
                <td>{v.install_name}</td>
                <td>{v.component_name}</td>
                <td>
                  <StatusBadge status={v.verdict} /> {v.reason ? <span class="muted">{v.reason}</span> : null}
                </td>
                <td class="lasted">{next ? lasted : bakeEnd !== null ? `${lasted} (to the bake's end)` : `${lasted} so far`}</td>
                <td>{verdictOf(i)}</td>
              </tr>
            );
          })}
        </tbody>
      </table>
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
        Baking: <strong>{span(gate.context.ends_at - data.now)} left</strong> of {bake} (ends{' '}
        <Time iso={new Date(gate.context.ends_at).toISOString()} /> on the engine's clock)
      </p>
    );
  } else if (row.status === 'succeeded') {
    const tolerated = streaksOf(row, data.now).filter((x) => !x.tripped);
    const one = tolerated.length === 1;
    const gateFor = gate ? span(gate.context.for_ms) : '?';
    state = (
      <p class="bake-left">
        {tolerated.length
          ? `Passed: the ${bake} bake ended without a trip; ${tolerated.length} bad verdict${one ? ' was' : 's were'} tolerated, ` +
            `ending before ${one ? 'it' : 'they'} lasted the gate's for (${gateFor}).`
          : row.verdicts.length
            ? `Passed: no bad verdict during the ${bake} bake.`
            : `Passed: the ${bake} bake ended with no verdict seen that trips the gate.`}
      </p>
    );
  } else if (row.status === 'failed' && gate?.context.trip) {
    const t = gate.context.trip;
    state = (
      <p class="bake-left step-error">
        Tripped: install {group.health.find((h) => h.install_id === t.install_id)?.name ?? t.install_id}, component{' '}
        {row.trip_component_name} was {t.verdict}: {t.reason ?? 'no reason given'}.
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
      <BakeVerdicts data={data} row={row} />
      {row.status === 'started' || row.status === 'failed' ? (
        <>
          <p>Verdicts of the group's installs now:</p>
          <ul class="verdicts">
            {health.map((h) => (
              <li>
                <a href={c.get('paths').install(h.install_id)}>{h.name}</a> <StatusBadge status={h.health} />
                {h.bad.length ? (
                  <ul>
                    {h.bad.map((b) => (
                      <li>
                        {b.name}: <StatusBadge status={b.verdict} /> {b.reason ?? ''}
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
            <a href={c.get('paths').install(w.install_id)}>{w.install_name ?? w.install_id}</a>:{' '}
            <a href={c.get('paths').workflow(w.workflow_id)}>{w.type}</a> <StatusBadge status={w.status} />
          </li>
        );
      })}
    </ul>
  );
};

/** Under a wait step: the windows (by name) holding the install, how long it waited, and when the next one lets it start. */
const WindowDetail = ({ data, row }: { data: RolloutView; row: RolloutStep }) => {
  const w = row.window!;
  const names = row.window_names.length ? row.window_names : w.window_ids;
  const since = row.waiting_since ?? (row.started_at ? Date.parse(row.started_at) : null);
  const windows = `change window${names.length === 1 ? '' : 's'} ${names.join(', ')}`;
  if (row.status === 'started') {
    return (
      <p class="window-wait">
        Held by {windows}
        {since !== null ? ` for ${span(data.now - since)} so far` : ''};{' '}
        {w.next_window_at ? (
          <>
            starts when it opens, <Time iso={w.next_window_at} />
          </>
        ) : (
          'no window lets it start within two weeks'
        )}{' '}
        (or at once when a window holding it is deleted).
      </p>
    );
  }
  if (since === null || !row.finished_at) return null;
  return (
    <p class="window-wait">
      Waited {span(Date.parse(row.finished_at) - since)} for {windows} (until <Time iso={row.finished_at} />
      ).
    </p>
  );
};

/** What goes under a step's card on a rollout's page. */
export function stepExtra(c: DashContext, data: RolloutView, stepId: string): Child {
  const row = data.steps.find((s) => s.step_id === stepId);
  if (!row) return null;
  const group = data.groups.find((g) => g.step_ids.includes(stepId));
  if (row.kind === 'bake' && group) return <BakeDetail c={c} data={data} row={row} group={group} />;
  if (row.kind === 'children') return <ChildrenDetail c={c} row={row} />;
  if (row.kind === 'verify') return <VerifyDetail data={data} row={row} />;
  if (row.kind === 'window' && row.window) return <WindowDetail data={data} row={row} />;
  return null;
}

/** A group's status in words: how far it got. */
export function groupStatus(data: RolloutView, g: RolloutGroup): string {
  const rows = data.steps.filter((s) => g.step_ids.includes(s.step_id));
  const rolledBack = rows.find((r) => r.rollback);
  if (rolledBack)
    return rolledBack.status === 'succeeded' ? 'rolled back' : rolledBack.status === 'failed' ? 'rollback failed' : 'rolling back';
  if (rows.some((r) => r.status === 'failed')) return 'failed';
  if (rows.every((r) => r.status === 'succeeded' || r.status === 'skipped')) return 'succeeded';
  if (rows.some((r) => r.status === 'awaiting_approval')) return 'awaiting approval';
  if (rows.some((r) => r.status === 'started')) {
    const kind = rows.find((r) => r.status === 'started')!.kind;
    return kind === 'bake' ? 'baking' : kind === 'verify' ? 'verifying' : 'deploying';
  }
  if (rows.every((r) => r.status === 'cancelled' || r.status === 'pending'))
    return rows.some((r) => r.status === 'cancelled') ? 'cancelled' : 'pending';
  return 'in progress';
}
