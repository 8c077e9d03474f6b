// Apps: the list, and one app: its configs (each with veto / lift veto), its installs, its rollouts
// (branch runs and fleet rollbacks) and "Roll back fleet": the plan first, then apply with a health
// gate and approvals (CONTRACT 4.3). The same service functions and request schemas as the API.
import type { Hono } from 'hono';
import { raw } from 'hono/html';
import { runInTurns, type Sliced } from '../../engine/turns.ts';
import type { AppContext } from '../../context.ts';
import { apiOp, change, may, refused } from '../changes.ts';
import { changedBy, type AuditView } from '../../services/audit.ts';
import { ConflictError, InvalidError, NotFoundError, VetoedError, type ErrorDetail } from '../../domain/errors.ts';
import { GATE_VERDICTS } from '../../domain/rollout.ts';
import { vetoSchema } from '../../schemas/apps.ts';
import { fleetRollbackSchema } from '../../schemas/rollbacks.ts';
import { issuesToDetails } from '../../http/validation.ts';
import { listApps, listConfigs, mustGetApp, unvetoConfig, vetoConfig } from '../../services/catalog.ts';
import { installNames as installNamesById, listInstalls } from '../../services/installs.ts';
import { planFleetRollbackInTurns, rollBackFleet, type FleetRollbackInput } from '../../services/rollback.ts';
import { listAppRollouts } from '../../services/rollouts.ts';
import { configNamer } from '../config-namer.ts';
import { csrfOf, render, renderList } from '../render.tsx';
import { flash, type DashContext, type DashEnv } from '../session.ts';
import {
  ActorName,
  Csrf,
  Diff,
  ScopeNote,
  Errors,
  FactLine,
  HintedField,
  RunCells,
  Section,
  StackTable,
  Time,
  type DiffShape,
  LabeledSelect,
} from '../ui.tsx';
import { installNamesOf, InstallsTable } from './overview.tsx';
import { ConfigVersionsChart } from './config-versions-chart.tsx';
import { ChangeWindows, registerChangeWindowActions } from './change-windows.tsx';
import { PlanMove } from './workflow.tsx';

type ConfigView = ReturnType<typeof listConfigs>[number];
type App = ReturnType<typeof mustGetApp>;

/** How many of an app's rollouts (fleet rollbacks and its branches' runs) its page lists. */
const ROLLOUTS_SHOWN = 20;
const pathsOf = (c: DashContext) => c.get('paths');

// ------------------------------------------------------------------ the fleet rollback form

/** What the "Roll back fleet" forms carry (the plan's query, the apply form's fields). */
interface RollbackFields {
  to: string;
  /** `k=v,k=v`: only the installs with these labels ('' = all of the app's installs) */
  selector: string;
  /** '' = no health gate */
  bake: string;
  on: string[];
  action: string;
  /** '' = a bad verdict trips at once */
  gateFor: string;
  /** rollout policy: '' = all at once / no failure allowed / the gate's action */
  maxParallel: string;
  failureBudget: string;
  onFailure: string;
  approval: string;
  /**
   * the verification URLs (CONTRACT 4.3 `verification`), one per line, with one secret and interval:
   * '' = none; the secret is never shown back
   */
  verifyUrl: string;
  verifySecret: string;
  verifyInterval: string;
}

const defaultFields = (to = 'previous', selector = ''): RollbackFields => ({
  to,
  selector,
  bake: '',
  on: [...GATE_VERDICTS],
  action: 'halt',
  gateFor: '',
  maxParallel: '',
  failureBudget: '',
  onFailure: '',
  approval: 'per_group',
  verifyUrl: '',
  verifySecret: '',
  verifyInterval: '',
});

/** `k=v,k=v` as match_labels; errors name the `selector` field. */
function parseSelector(text: string): { labels?: Record<string, string>; errors: ErrorDetail[] } {
  const t = text.trim();
  if (!t) return { errors: [] };
  const labels: Record<string, string> = {};
  for (const part of t.split(',')) {
    const eq = part.indexOf('=');
    if (eq <= 0) return { errors: [{ path: 'selector', message: `"${part.trim()}" is not key=value (e.g. ring=canary,region=eu)` }] };
    labels[part.slice(0, eq).trim()] = part.slice(eq + 1).trim();
  }
  return { labels, errors: [] };
}

/** What a run does when a group fails (a gate's `action`, the policy's `on_failure`): the options of its select. */
const HaltOrRollback = ({ selected }: { selected: string }) => (
  <>
    <option value="halt" selected={selected === 'halt'}>
      halt: stop the run, cancel the later groups
    </option>
    <option value="rollback" selected={selected === 'rollback'}>
      rollback: also return what the run deployed to its configs before the run
    </option>
  </>
);

/** The API body of a fleet rollback from the form, validated by the API's own schema. */
function rollbackBody(f: RollbackFields, planOnly: boolean): { body?: FleetRollbackInput; errors: ErrorDetail[] } {
  const sel = parseSelector(f.selector);
  if (sel.errors.length) return { errors: sel.errors };
  const raw: Record<string, unknown> = { to: f.to, plan_only: planOnly };
  if (sel.labels) raw.selector = { match_labels: sel.labels };
  if (!planOnly) {
    if (f.bake.trim())
      raw.health_gate = { bake: f.bake.trim(), on: f.on, action: f.action, ...(f.gateFor.trim() ? { for: f.gateFor.trim() } : {}) };
    raw.approval = f.approval;
    const rollout: Record<string, unknown> = {};
    // numbers as typed: the API's schema says what is wrong with one that is not
    const num = (v: string) => (/^\s*-?\d+(\.\d+)?\s*$/.test(v) ? Number(v) : v.trim());
    if (f.maxParallel.trim()) rollout.max_parallel = num(f.maxParallel);
    if (f.failureBudget.trim()) rollout.failure_budget = { max_failed_pct: num(f.failureBudget.replace(/%\s*$/, '')) };
    if (f.onFailure) rollout.on_failure = f.onFailure;
    if (Object.keys(rollout).length) raw.rollout = rollout;
    // one URL per line (the API takes up to 5, and says so past that), each with the secret and interval given
    const urls = f.verifyUrl.split(/\s+/).filter(Boolean);
    if (!urls.length && (f.verifySecret || f.verifyInterval.trim()))
      return { errors: [{ path: 'verification.0.url', message: 'a verification URL is needed for its secret or interval' }] };
    if (urls.length)
      raw.verification = urls.map((url) => ({
        url,
        ...(f.verifySecret ? { secret: f.verifySecret } : {}),
        ...(f.verifyInterval.trim() ? { interval: f.verifyInterval.trim() } : {}),
      }));
  }
  const parsed = fleetRollbackSchema.safeParse(raw);
  return parsed.success ? { body: parsed.data, errors: [] } : { errors: issuesToDetails(parsed.error.issues) };
}

const str = (v: unknown) => (typeof v === 'string' ? v : '');
const strs = (v: unknown) => (Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : typeof v === 'string' ? [v] : []);

const isRefusal = (err: unknown) => err instanceof InvalidError || err instanceof ConflictError || err instanceof NotFoundError;
const refusalDetails = (err: unknown): ErrorDetail[] =>
  err instanceof InvalidError && err.details?.length
    ? err.details
    : [{ path: err instanceof VetoedError ? 'to' : '(request)', message: err instanceof Error ? err.message : String(err) }];

// ------------------------------------------------------------------ pages

const Breadcrumb = ({ c, app }: { c: DashContext; app?: App }) => (
  <p class="muted">
    <a href={c.get('paths').apps}>Apps</a> /
    {app ? (
      <>
        {' '}
        <a href={c.get('paths').app(app.app_id)}>{app.name}</a> /
      </>
    ) : null}
  </p>
);

/** A config's veto: the reason, who vetoed it (when the audit log still says), since when. */
const VetoNote = ({ vetoed, by }: { vetoed: NonNullable<ConfigView['vetoed']>; by?: AuditView }) => (
  <p>
    <span class="badge s-failed">vetoed</span> {vetoed.reason}{' '}
    {by ? (
      <>
        by <ActorName actor={by.actor} />{' '}
      </>
    ) : null}
    <span class="muted">since</span> <Time iso={vetoed.at} />
  </p>
);

const VetoCell = ({ app, cfg, c, by }: { app: App; cfg: ConfigView; c: DashContext; by?: AuditView }) => {
  const paths = c.get('paths');
  if (!may(c, 'deploy')) {
    return cfg.vetoed ? <VetoNote vetoed={cfg.vetoed} by={by} /> : <span class="muted">—</span>;
  }
  return cfg.vetoed ? (
    <div class="vetoed">
      <VetoNote vetoed={cfg.vetoed} by={by} />
      <form method="post" action={paths.configUnveto(app.app_id, cfg.app_config_id)} class="inline">
        <Csrf token={csrfOf(c)} />
        <button type="submit" class="secondary">
          Lift veto<span class="sr-only"> on config v{cfg.version}</span>
        </button>
      </form>
    </div>
  ) : (
    <form method="post" action={paths.configVeto(app.app_id, cfg.app_config_id)} class="actions">
      <Csrf token={csrfOf(c)} />
      <label for={`veto-${cfg.app_config_id}`} class="sr-only">
        Reason for vetoing config v{cfg.version}
      </label>
      <input
        type="text"
        id={`veto-${cfg.app_config_id}`}
        name="reason"
        required
        maxlength={1000}
        placeholder="why it must not be applied"
        class="grow"
      />
      <button type="submit" class="danger">
        Veto<span class="sr-only"> config v{cfg.version}</span>
      </button>
    </form>
  );
};

const ConfigsTable = ({
  app,
  configs,
  installsOn,
  c,
  vetoedBy,
}: {
  app: App;
  configs: ConfigView[];
  installsOn: Map<string, number>;
  c: DashContext;
  vetoedBy?: Map<string, AuditView>;
}) => (
  <StackTable
    columns={['Config', 'Created', 'Installs on it', 'Veto']}
    items={configs}
    empty={`No configs yet. Create one with the API: POST /v1/apps/${app.app_id}/configs.`}
    row={(cfg) => (
      <tr id={`config-${cfg.app_config_id}`} class={cfg.vetoed ? 'row-vetoed' : undefined}>
        <td data-label="Config">
          <strong>v{cfg.version}</strong> <span class="muted id">{cfg.app_config_id}</span>
          <details>
            <summary>
              Components<span class="sr-only"> of v{cfg.version}</span>
            </summary>
            <ul>
              {cfg.components.map((cmp) => (
                <li>
                  {cmp.name} <span class="muted">{JSON.stringify(cmp.values ?? {})}</span>
                </li>
              ))}
            </ul>
          </details>
        </td>
        <td data-label="Created">
          <Time iso={cfg.created_at} />
        </td>
        <td data-label="Installs on it">{installsOn.get(cfg.app_config_id) ?? 0}</td>
        <td data-label="Veto">
          <VetoCell app={app} cfg={cfg} c={c} by={vetoedBy?.get(cfg.app_config_id)} />
        </td>
      </tr>
    )}
  />
);

const ToOptions = ({ configs, selected }: { configs: ConfigView[]; selected: string }) => (
  <>
    <option value="previous" selected={selected === 'previous'}>
      previous: each install to the config of its version before the current one
    </option>
    {configs.map((cfg) => (
      <option value={cfg.app_config_id} selected={selected === cfg.app_config_id}>
        config v{cfg.version} ({cfg.app_config_id}){cfg.vetoed ? ' — vetoed' : ''}
      </option>
    ))}
  </>
);

const FleetRollbackForm = ({ app, configs, c }: { app: App; configs: ConfigView[]; c: DashContext }) => (
  <form method="get" action={c.get('paths').fleetRollback(app.app_id)} class="stack">
    <LabeledSelect id="fleet-to" label="Roll back to" name="to">
      <ToOptions configs={configs} selected="previous" />
    </LabeledSelect>
    <HintedField
      id="fleet-selector"
      label="Only installs with labels (optional)"
      hint={
        <>
          Comma-separated <code>key=value</code> pairs; blank: every install of the app. You will see the plan per install first; nothing
          changes until you apply it.
        </>
      }
      type="text"
      name="selector"
      placeholder="ring=canary,region=eu"
    />
    <div>
      <button type="submit">Plan fleet rollback</button>
    </div>
  </form>
);

type FleetPlan = Extract<ReturnType<typeof rollBackFleet>, { status: 200 }>['body']['plan'];

interface PlanPageData {
  app: App;
  fields: RollbackFields;
  plan: FleetPlan;
  errors?: ErrorDetail[];
}

/** The plan: per group, per install the move and its diff; the installs left out and why; then apply with gate options. */
/** Installs a fleet-rollback plan page shows at most (each with its diff), shared between its groups. */
const PLAN_INSTALLS_SHOWN = 100;

async function renderPlanPage(ctx: AppContext, c: DashContext, { app, fields, plan, errors }: PlanPageData, status: 200 | 400 | 409 = 200) {
  const orgId = c.req.param('org')!;
  const paths = c.get('paths');
  const configName = configNamer(ctx, orgId);
  const skippedShown = plan.skipped.slice(0, PLAN_INSTALLS_SHOWN);
  const installNames = installNamesById(
    ctx,
    orgId,
    skippedShown.map((s) => s.install_id),
  );
  // per group, its installs in plan order; a page shows at most PLAN_INSTALLS_SHOWN of them in all
  // (rendering a thousand diffs would hold the engine's thread past CONTRACT §8's 50 ms, and nobody reads them)
  const byGroup = new Map<string, FleetPlan['installs']>();
  for (const i of plan.installs) {
    const list = byGroup.get(i.install_group);
    if (list) list.push(i);
    else byGroup.set(i.install_group, [i]);
  }
  const groups = [...byGroup.keys()];
  const perGroup = Math.max(1, Math.floor(PLAN_INSTALLS_SHOWN / Math.max(1, groups.length)));
  const shown = (g: string) => (byGroup.get(g) ?? []).slice(0, perGroup);
  const items = await runInTurns(planItems(c, groups.flatMap(shown), configName));
  const vetoed = plan.installs.filter((i) => i.vetoed);
  const target =
    fields.to === 'previous' ? 'previous (each install to the config of its version before the current one)' : configName(fields.to);
  return render(
    c,
    {
      title: `Fleet rollback plan · ${app.name}`,
      current: 'apps',
      children: (
        <>
          <Breadcrumb c={c} app={app} />
          <h1>Fleet rollback plan for {app.name}</h1>
          <Errors errors={errors} title="The rollback was not started:" />
          <Section headingId="h-plan-what" title="What it does">
            <dl class="facts">
              <FactLine term="To">{target}</FactLine>
              <FactLine term="Installs">
                {fields.selector.trim() ? (
                  <>
                    with labels <code>{fields.selector.trim()}</code>
                  </>
                ) : (
                  'every install of the app'
                )}
              </FactLine>
              <FactLine term="Moves">
                {plan.installs.length} install(s) in {groups.length} group(s); {plan.skipped.length} skipped
              </FactLine>
            </dl>
            {vetoed.length ? (
              <p class="step-error" role="alert">
                {vetoed.length} install(s) would get a vetoed config (
                {[...new Set(vetoed.map((i) => `${configName(i.new_app_config_id)}: ${i.vetoed!.reason}`))].join('; ')}). Applying will be
                refused; lift the veto first.
              </p>
            ) : null}
          </Section>
          {groups.map((g, n) => (
            <PlanGroup n={n} name={g} installs={byGroup.get(g) ?? []} shown={shown(g)} items={items} app={app} />
          ))}
          <Section headingId="h-skipped" title={`Skipped (${plan.skipped.length})`}>
            {plan.skipped.length ? (
              <ul class="skipped">
                {skippedShown.map((s) => (
                  <li>
                    <a href={paths.install(s.install_id)}>{installNames.get(s.install_id) ?? s.install_id}</a>: {s.reason}
                  </li>
                ))}
              </ul>
            ) : (
              <p class="muted">None: every selected install moves.</p>
            )}
          </Section>
          <Section headingId="h-apply" title="Apply">
            {plan.installs.length ? (
              <ApplyForm app={app} fields={fields} c={c} />
            ) : (
              <p>
                Nothing to roll back. <a href={paths.app(app.app_id)}>Back to {app.name}</a>
              </p>
            )}
          </Section>
        </>
      ),
    },
    status,
  );
}

/**
 * The shown installs' entries of a plan page, each with its move, its wait and its diff, rendered an
 * install at a time in turns of the engine's thread (CONTRACT §8: a hundred diffs at once held it
 * for up to 30 ms).
 */
function* planItems(
  c: DashContext,
  installs: FleetPlan['installs'],
  configName: (id: string | null | undefined) => string,
): Sliced<Map<string, string>> {
  const paths = c.get('paths');
  const items = new Map<string, string>();
  for (const i of installs) {
    const item = (
      <li class="plan-install">
        <p>
          <PlanMove
            href={paths.install(i.install_id)}
            move={i}
            configName={configName}
            badge={i.vetoed ? <span class="badge s-failed">vetoed</span> : null}
          />
        </p>
        {i.blocked_by?.length ? (
          <p class="window-wait">
            <span class="badge">waits for a change window</span> {(i.blocked_by_names ?? i.blocked_by).join(', ')}: starts{' '}
            {i.scheduled_at ? <Time iso={i.scheduled_at} /> : 'when a window changes (none opens within two weeks)'}
          </p>
        ) : null}
        <Diff diff={i.diff as DiffShape} />
      </li>
    );
    items.set(i.install_id, String(item));
    yield;
  }
  return items;
}

/** One group of a fleet rollback plan: its installs (at most `shown` of them, rendered in `items`). */
const PlanGroup = ({
  n,
  name,
  installs,
  shown,
  items,
  app,
}: {
  n: number;
  name: string;
  installs: FleetPlan['installs'];
  shown: FleetPlan['installs'];
  items: Map<string, string>;
  app: App;
}) => (
  <section aria-labelledby={`h-group-${n}`} class="group">
    <h2 id={`h-group-${n}`}>
      Group {n + 1}: {name}
    </h2>
    {installs.length > shown.length ? (
      <p class="muted">
        Showing {shown.length} of {installs.length} installs of this group; every one of them is in the rollback. The whole plan:{' '}
        <code>POST /v1/apps/{app.app_id}/rollbacks</code> with <code>plan_only</code>.
      </p>
    ) : null}
    <ul class="plain">{shown.map((i) => raw(items.get(i.install_id) ?? ''))}</ul>
  </section>
);

const ApplyForm = ({ app, fields, c }: { app: App; fields: RollbackFields; c: DashContext }) => {
  const paths = c.get('paths');
  return (
    <form method="post" action={paths.fleetRollback(app.app_id)} class="stack">
      <Csrf token={csrfOf(c)} />
      <input type="hidden" name="to" value={fields.to} />
      <input type="hidden" name="selector" value={fields.selector} />
      <GateFields fields={fields} />
      <RolloutFields fields={fields} />
      <VerificationFields fields={fields} />
      <ApprovalFields fields={fields} />
      <div class="actions">
        <button type="submit">Apply fleet rollback</button>
        <a class="button secondary" href={paths.app(app.app_id)}>
          Cancel
        </a>
      </div>
    </form>
  );
};

/** The health gate of a fleet rollback: bake time, how long a bad verdict lasts, the verdicts that trip it, what it does. */
const GateFields = ({ fields }: { fields: RollbackFields }) => (
  <fieldset>
    <legend>Health gate</legend>
    <HintedField
      id="gate-bake"
      label="Bake time after each group deploys"
      hint="0s to 24h (e.g. 90s, 10m, 1h) on the engine's clock. Blank: no health gate."
      type="text"
      name="bake"
      value={fields.bake}
      placeholder="10m"
    />
    <HintedField
      id="gate-for"
      label="A bad verdict trips once it has lasted"
      hint="0s to 1h: a verdict that turns good again sooner does not trip. Blank: at once."
      type="text"
      name="gate_for"
      value={fields.gateFor}
      placeholder="30s"
    />
    <fieldset>
      <legend>Trip on a verdict</legend>
      {GATE_VERDICTS.map((v) => (
        <label class="check">
          <input type="checkbox" name="on" value={v} checked={fields.on.includes(v)} /> {v}
        </label>
      ))}
    </fieldset>
    <LabeledSelect id="gate-action" label="When the gate trips" name="action">
      <HaltOrRollback selected={fields.action} />
    </LabeledSelect>
  </fieldset>
);

/** How a fleet rollback goes through a group: installs at a time, the failure budget, what a failed group does. */
const RolloutFields = ({ fields }: { fields: RollbackFields }) => (
  <fieldset>
    <legend>Rollout</legend>
    <HintedField
      id="max-parallel"
      label="Installs of a group updated at a time"
      hint="1 to 1000, in the order the installs were created, the next as one ends. Blank: all at once."
      type="text"
      inputmode="numeric"
      name="max_parallel"
      value={fields.maxParallel}
      placeholder="all"
    />
    <HintedField
      id="failure-budget"
      label="Failures a group may have (% of its installs)"
      hint="0 to 100: a group fails once more than this share of its installs failed. Blank: its first failure."
      type="text"
      inputmode="decimal"
      name="failure_budget"
      value={fields.failureBudget}
      placeholder="0"
    />
    <LabeledSelect id="on-failure" label="When a group fails" name="on_failure">
      <option value="" selected={fields.onFailure === ''}>
        as the health gate says (halt without one)
      </option>
      <HaltOrRollback selected={fields.onFailure} />
    </LabeledSelect>
  </fieldset>
);

/** A fleet rollback's verification: the URL svc asks after each group, its secret and interval. */
const VerificationFields = ({ fields }: { fields: RollbackFields }) => (
  <fieldset>
    <legend>Verification</legend>
    <div>
      <label for="verify-url">Verification URLs, one per line</label>
      <textarea
        id="verify-url"
        name="verify_url"
        rows={2}
        placeholder="https://checks.example.com/verify"
        aria-describedby="verify-url-hint"
      >
        {fields.verifyUrl}
      </textarea>
      <p class="hint" id="verify-url-hint">
        After each group deploys, svc POSTs a com.svc.rollout.verification.v1 event to each (up to 5) until it answers a verdict (pass, fail
        or pending); the group moves on once every one passes. Blank: no verification.
      </p>
    </div>
    <HintedField
      id="verify-secret"
      label="Verification secret (optional)"
      hint="Signs each request (Standard Webhooks, as a delivery). Never shown again: type it again after an error."
      type="password"
      name="verify_secret"
      value=""
      autocomplete="off"
    />
    <HintedField
      id="verify-interval"
      label="Ask again every"
      hint="10s to 10m while it answers pending. Blank: 30s."
      type="text"
      name="verify_interval"
      value={fields.verifyInterval}
      placeholder="30s"
    />
  </fieldset>
);

/** Whether each group's plan waits for an approval. */
const ApprovalFields = ({ fields }: { fields: RollbackFields }) => (
  <fieldset>
    <legend>Approval</legend>
    <label class="check">
      <input type="radio" name="approval" value="per_group" checked={fields.approval !== 'none'} /> Approve each group's plan before it
      deploys
    </label>
    <label class="check">
      <input type="radio" name="approval" value="none" checked={fields.approval === 'none'} /> No approval: deploy group after group
    </label>
  </fieldset>
);

export function registerApps(r: Hono<DashEnv>, ctx: AppContext) {
  r.get('/:org/apps', (c) => {
    const orgId = c.req.param('org');
    const paths = c.get('paths');
    const apps = listApps(ctx, orgId);
    const installs = listInstalls(ctx, orgId);
    return renderList(
      c,
      'Apps',
      'apps',
      <StackTable
        columns={['App', 'Configs', 'Installs', 'Created']}
        items={apps}
        empty="No apps yet. Create one with the API: POST /v1/apps."
        row={(a) => {
          const configs = listConfigs(ctx, orgId, a.app_id);
          const vetoed = configs.filter((x) => x.vetoed).length;
          return (
            <tr>
              <td data-label="App">
                <a href={paths.app(a.app_id)}>{a.name}</a> <span class="muted id">{a.app_id}</span>
              </td>
              <td data-label="Configs">
                {configs.length}
                {vetoed ? ` (${vetoed} vetoed)` : ''}
              </td>
              <td data-label="Installs">{installs.filter((i) => i.app_id === a.app_id).length}</td>
              <td data-label="Created">
                <Time iso={a.created_at} />
              </td>
            </tr>
          );
        }}
      />,
    );
  });
  registerAppPage(r, ctx);
  registerAppActions(r, ctx);
  registerChangeWindowActions(r, ctx);
}

/** An app's page: its configs, installs and rollouts. */
function registerAppPage(r: Hono<DashEnv>, ctx: AppContext) {
  r.get('/:org/apps/:app', (c) => {
    const orgId = c.req.param('org');
    const app = mustGetApp(ctx, orgId, c.req.param('app'));
    const paths = c.get('paths');
    const configs = listConfigs(ctx, orgId, app.app_id);
    const installs = listInstalls(ctx, orgId).filter((i) => i.app_id === app.app_id);
    const installsOn = new Map<string, number>();
    for (const i of installs) if (i.app_config_id) installsOn.set(i.app_config_id, (installsOn.get(i.app_config_id) ?? 0) + 1);
    const { rollouts, branchNames: branchName } = listAppRollouts(ctx, orgId, app.app_id, ROLLOUTS_SHOWN);
    return render(c, {
      title: app.name,
      current: 'apps',
      children: (
        <>
          <Breadcrumb c={c} />
          <h1>
            {app.name} <span class="muted id">{app.app_id}</span>
          </h1>
          <Section headingId="h-configs" title="Configs">
            <p class="hint">
              A vetoed config is refused wherever it would be applied (install updates, branch runs, fleet rollbacks, new installs).
            </p>
            <ConfigVersionsChart
              configs={configs.map((x) => ({ app_config_id: x.app_config_id, version: x.version, vetoed: !!x.vetoed }))}
              installsOn={installsOn}
              total={installs.length}
            />
            <ConfigsTable
              app={app}
              configs={configs}
              installsOn={installsOn}
              c={c}
              vetoedBy={changedBy(
                ctx,
                orgId,
                configs.filter((x) => x.vetoed).map((x) => x.app_config_id),
                ['configs.veto'],
              )}
            />
          </Section>
          <Section headingId="h-fleet" title="Roll back fleet">
            {!installs.length ? (
              <p class="muted">No installs to roll back.</p>
            ) : may(c, 'deploy') ? (
              <FleetRollbackForm app={app} configs={configs} c={c} />
            ) : (
              <ScopeNote have={c.get('session')?.scope ?? 'read'} need="deploy" what="Rolling back the fleet" />
            )}
          </Section>
          <Section headingId="h-windows" title="Change windows">
            <ChangeWindows c={c} ctx={ctx} orgId={orgId} appId={app.app_id} />
          </Section>
          <Section headingId="h-app-installs" title={`Installs (${installs.length})`}>
            <InstallsTable installs={installs} paths={paths} names={installNamesOf(ctx, orgId, installs)} />
          </Section>
          <Section headingId="h-rollouts" title="Rollouts">
            <StackTable
              columns={['Rollout', 'Status', 'Created', 'Duration']}
              items={rollouts}
              empty="No branch runs or fleet rollbacks yet."
              row={(w) => (
                <tr>
                  <td data-label="Rollout">
                    <a href={paths.workflow(w.workflow_id)}>
                      {w.type === 'app_rollback' ? 'fleet rollback' : `branch run of ${branchName.get(w.owner_id) ?? w.owner_id}`}
                    </a>{' '}
                    <span class="muted id">{w.workflow_id}</span>
                  </td>
                  <RunCells run={w} time={w.created_at} timeLabel="Created" />
                </tr>
              )}
            />
          </Section>
        </>
      ),
    });
  });
}

/** Vetoes and the fleet rollback (plan, then apply). */
function registerAppActions(r: Hono<DashEnv>, ctx: AppContext) {
  r.post('/:org/apps/:app/configs/:cfg/veto', async (c) => {
    const orgId = c.req.param('org');
    const app = mustGetApp(ctx, orgId, c.req.param('app'));
    const body = await c.req.parseBody();
    const parsed = vetoSchema.safeParse({ reason: str(body.reason) });
    if (!parsed.success) {
      refused(c, ctx, apiOp('vetoAppConfig'), 400, c.req.param('cfg'));
      flash(c, {
        kind: 'error',
        text: `Veto refused: ${issuesToDetails(parsed.error.issues)
          .map((d) => `${d.path}: ${d.message}`)
          .join('; ')}`,
      });
    } else {
      const cfg = change(c, ctx, apiOp('vetoAppConfig'), { id: c.req.param('cfg') }, () =>
        vetoConfig(ctx, orgId, app.app_id, c.req.param('cfg'), parsed.data.reason),
      );
      flash(c, { kind: 'ok', text: `Config v${cfg.version} vetoed: applying it is refused until the veto is lifted.` });
    }
    return c.redirect(pathsOf(c).app(app.app_id), 303);
  });

  r.post('/:org/apps/:app/configs/:cfg/unveto', (c) => {
    const orgId = c.req.param('org');
    const app = mustGetApp(ctx, orgId, c.req.param('app'));
    const cfg = change(c, ctx, apiOp('unvetoAppConfig'), { id: c.req.param('cfg') }, () =>
      unvetoConfig(ctx, orgId, app.app_id, c.req.param('cfg')),
    );
    flash(c, { kind: 'ok', text: `Veto on config v${cfg.version} lifted.` });
    return c.redirect(pathsOf(c).app(app.app_id), 303);
  });

  r.get('/:org/apps/:app/rollback', async (c) => {
    const orgId = c.req.param('org');
    const app = mustGetApp(ctx, orgId, c.req.param('app'));
    const fields = defaultFields(c.req.query('to') || 'previous', c.req.query('selector') ?? '');
    const { body, errors } = rollbackBody(fields, true);
    let plan: FleetPlan | undefined;
    try {
      // a plan changes nothing: worked out in turns of the engine's thread (CONTRACT §8)
      if (body) plan = (await planFleetRollbackInTurns(ctx, orgId, app.app_id, body)).body.plan;
    } catch (err) {
      if (!isRefusal(err)) throw err;
      errors.push(...refusalDetails(err));
    }
    if (!plan) {
      flash(c, { kind: 'error', text: `Fleet rollback refused: ${errors.map((d) => `${d.path}: ${d.message}`).join('; ')}` });
      return c.redirect(pathsOf(c).app(app.app_id), 303);
    }
    return renderPlanPage(ctx, c, { app, fields, plan });
  });

  r.post('/:org/apps/:app/rollback', async (c) => {
    const orgId = c.req.param('org');
    const app = mustGetApp(ctx, orgId, c.req.param('app'));
    const form = await c.req.parseBody({ all: true });
    const fields: RollbackFields = {
      to: str(form.to) || 'previous',
      selector: str(form.selector),
      bake: str(form.bake),
      on: strs(form.on),
      action: str(form.action) || 'halt',
      gateFor: str(form.gate_for),
      maxParallel: str(form.max_parallel),
      failureBudget: str(form.failure_budget),
      onFailure: str(form.on_failure),
      approval: str(form.approval) || 'per_group',
      verifyUrl: str(form.verify_url),
      verifySecret: str(form.verify_secret),
      verifyInterval: str(form.verify_interval),
    };
    const planned = rollbackBody(fields, true);
    let plan: FleetPlan | undefined;
    try {
      if (planned.body) plan = (await planFleetRollbackInTurns(ctx, orgId, app.app_id, planned.body)).body.plan;
    } catch (err) {
      if (!isRefusal(err)) throw err;
      planned.errors.push(...refusalDetails(err));
    }
    if (!plan) {
      flash(c, { kind: 'error', text: `Fleet rollback refused: ${planned.errors.map((d) => `${d.path}: ${d.message}`).join('; ')}` });
      return c.redirect(pathsOf(c).app(app.app_id), 303);
    }
    const { body, errors } = rollbackBody(fields, false);
    if (!body) {
      refused(c, ctx, apiOp('rollBackAppFleet'), 400, app.app_id);
      return renderPlanPage(ctx, c, { app, fields, plan, errors }, 400);
    }
    try {
      const res = change(
        c,
        ctx,
        apiOp('rollBackAppFleet'),
        { idOf: (x) => x.body.run_id, status: 201 },
        // the session's token started it: an approval policy's prevent_self_approval knows it (CONTRACT 10.4)
        () =>
          rollBackFleet(ctx, orgId, app.app_id, body, c.get('session')?.actor ?? null) as Extract<
            ReturnType<typeof rollBackFleet>,
            { status: 201 }
          >,
      );
      flash(c, { kind: 'ok', text: `Fleet rollback started: ${res.body.plan.installs.length} install(s).` });
      return c.redirect(pathsOf(c).workflow(res.body.workflow_id), 303);
    } catch (err) {
      if (!isRefusal(err)) throw err;
      return renderPlanPage(ctx, c, { app, fields, plan, errors: refusalDetails(err) }, err instanceof InvalidError ? 400 : 409);
    }
  });
}
