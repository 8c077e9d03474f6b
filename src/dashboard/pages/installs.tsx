// Installs: the list, one install (config, versions with diffs, rollback), its sandbox and components.
import type { Hono } from 'hono';
import type { AppContext } from '../../context.ts';
import { apiOp, change, may } from '../changes.ts';
import { ConflictError, InvalidError, NotFoundError } from '../../domain/errors.ts';
import { getInstallView, listInstalls, listInstallWorkflows } from '../../services/installs.ts';
import { listInstallVersions, updateInstallConfig, versionDiff } from '../../services/rollback.ts';
import { getWorkflowView, type StepView, type WorkflowView } from '../../services/workflows.ts';
import { appName, branchName, componentNames, configVersion } from '../../services/names.ts';
import { configNamer } from '../config-namer.ts';
import { csrfOf, render, renderList } from '../render.tsx';
import { flash, type DashContext, type DashEnv } from '../session.ts';
import {
  Csrf,
  Diff,
  ScopeNote,
  FactLine,
  Json,
  LabelList,
  RunCells,
  Section,
  StackTable,
  StatusBadge,
  Time,
  type DiffShape,
  CodeFact,
  Heading,
  LabeledSelect,
} from '../ui.tsx';
import { installNamesOf, InstallsTable, WorkflowsTable } from './overview.tsx';

type InstallView = ReturnType<typeof getInstallView>;
type Version = ReturnType<typeof listInstallVersions>[number];

/** How many of an install's newest workflows the sandbox and component pages scan for their steps. */
const HISTORY_WORKFLOWS = 30;

/** Names of what an install refers to by id: its app, its config's version, its branch. */
function installRefs(ctx: AppContext, orgId: string, install: InstallView) {
  return {
    app: appName(ctx, orgId, install.app_id),
    configVersion: install.app_config_id ? configVersion(ctx, orgId, install.app_config_id) : null,
    branch: install.app_branch_id ? branchName(ctx, orgId, install.app_branch_id) : null,
  };
}

const Id = ({ id }: { id: string }) => <span class="muted id">{id}</span>;

const InstallFacts = ({ install, refs, c }: { install: InstallView; refs: ReturnType<typeof installRefs>; c: DashContext }) => {
  const paths = c.get('paths');
  return (
    <dl class="facts">
      <CodeFact term="Install ID" value={install.install_id} />
      <FactLine term="App">
        {refs.app ? <a href={paths.app(install.app_id)}>{refs.app}</a> : null} <Id id={install.app_id} />
      </FactLine>
      <FactLine term="App config">
        {install.app_config_id ? (
          <>
            {refs.configVersion !== null ? `v${refs.configVersion} ` : null}
            <Id id={install.app_config_id} />
          </>
        ) : (
          '—'
        )}
      </FactLine>
      <FactLine term="Health">
        <StatusBadge status={install.health} />
      </FactLine>
      <FactLine term="Provisioned">{install.provisioned ? 'yes' : 'no'}</FactLine>
      <FactLine term="Labels">
        <LabelList labels={install.labels} />
      </FactLine>
      <FactLine term="Sandbox">
        <a href={paths.sandbox(install.install_id)}>Sandbox of {install.name}</a> <Id id={install.sandbox_id} />
      </FactLine>
      <CodeFact term="Runner" value={install.runner_id} />
      {install.app_branch_id ? (
        <FactLine term="Branch">
          {refs.branch ?? null} <Id id={install.app_branch_id} />
        </FactLine>
      ) : null}
    </dl>
  );
};

const configLabel = (v: Version) => `config v${v.app_config?.version ?? '?'} (${v.app_config_id})`;

/** Earlier configs of the install's history, newest first, without the current one. */
function rollbackChoices(versions: Version[], currentConfigId: string | null): Version[] {
  const seen = new Set<string>(currentConfigId ? [currentConfigId] : []);
  return versions.filter((v) => !seen.has(v.app_config_id) && (seen.add(v.app_config_id), true));
}

type VersionDiff = DiffShape & { from_app_config_id: string | null; from_name: string };

const VersionHistory = ({ versions, diffs, c }: { versions: Version[]; diffs: Map<string, VersionDiff>; c: DashContext }) => (
  <ul class="plain">
    {versions.map((v) => (
      <li>
        <p>
          <strong>Version {v.version}</strong> · {configLabel(v)} · <StatusBadge status={v.status} /> · <Time iso={v.created_at} />
          {v.workflow_id ? (
            <>
              {' '}
              · <a href={c.get('paths').workflow(v.workflow_id)}>workflow</a>
            </>
          ) : null}
        </p>
        <details>
          <summary>
            {diffs.get(v.version_id)?.from_app_config_id
              ? `Diff from ${diffs.get(v.version_id)!.from_name}`
              : 'Diff from nothing (first config)'}
          </summary>
          {diffs.get(v.version_id) ? <Diff diff={diffs.get(v.version_id)!} /> : <p class="muted">No diff.</p>}
        </details>
      </li>
    ))}
  </ul>
);

const RollbackForm = ({ install, choices, c }: { install: InstallView; choices: Version[]; c: DashContext }) =>
  choices.length && !may(c, 'deploy') ? (
    <ScopeNote have={c.get('session')?.scope ?? 'read'} need="deploy" what="Rolling back" />
  ) : choices.length ? (
    <form method="post" action={c.get('paths').rollbackPlan(install.install_id)} class="stack">
      <Csrf token={csrfOf(c)} />
      <LabeledSelect
        id="rollback-config"
        label="Roll back to"
        name="app_config_id"
        required
        after={<p class="hint">You will see the plan first; nothing changes until you apply it.</p>}
      >
        {choices.map((v) => (
          <option value={v.app_config_id}>
            {configLabel(v)}, as in version {v.version}
          </option>
        ))}
      </LabeledSelect>
      <div>
        <button type="submit">Plan rollback</button>
      </div>
    </form>
  ) : (
    <p class="muted">No earlier config in this install's history.</p>
  );

/** The install's newest workflows, each with its steps (for the sandbox and component histories). */
function recentWorkflowViews(ctx: AppContext, orgId: string, installId: string): WorkflowView[] {
  return listInstallWorkflows(ctx, orgId, installId)
    .slice(0, HISTORY_WORKFLOWS)
    .map((w) => getWorkflowView(ctx, orgId, w.workflow_id));
}

const StepHistory = ({ rows, c }: { rows: Array<{ wf: WorkflowView; step: StepView }>; c: DashContext }) => (
  <StackTable
    columns={['Step', 'Workflow', 'Status', 'Started', 'Duration']}
    items={rows}
    empty="No runs yet."
    row={({ wf, step }) => (
      <tr>
        <td data-label="Step">{step.name}</td>
        <td data-label="Workflow">
          <a href={c.get('paths').workflow(wf.workflow_id)}>{wf.type}</a>
        </td>
        <RunCells run={step} time={step.started_at} timeLabel="Started" />
      </tr>
    )}
  />
);

function stepsWhere(views: WorkflowView[], pred: (s: StepView) => boolean) {
  return views.flatMap((wf) => wf.steps.filter(pred).map((step) => ({ wf, step })));
}

const currentConfig = (versions: Version[], install: InstallView) =>
  versions.find((v) => v.app_config_id === install.app_config_id)?.app_config ?? null;

function planFailed(c: DashContext, installId: string, err: unknown) {
  if (err instanceof InvalidError || err instanceof ConflictError || err instanceof NotFoundError) {
    flash(c, { kind: 'error', text: `Rollback refused: ${err.message}` });
    return c.redirect(c.get('paths').install(installId), 303);
  }
  throw err;
}

const formField = async (c: DashContext, name: string) => {
  const v = (await c.req.parseBody())[name];
  return typeof v === 'string' ? v : '';
};

export function registerInstalls(r: Hono<DashEnv>, ctx: AppContext) {
  r.get('/:org/installs', (c) => {
    const orgId = c.req.param('org');
    const installs = listInstalls(ctx, orgId);
    const names = installNamesOf(ctx, orgId, installs);
    return renderList(c, 'Installs', 'installs', <InstallsTable installs={installs} paths={c.get('paths')} names={names} />);
  });

  r.get('/:org/installs/:install', (c) => {
    const orgId = c.req.param('org');
    const install = getInstallView(ctx, orgId, c.req.param('install'));
    const paths = c.get('paths');
    const versions = listInstallVersions(ctx, orgId, install.install_id);
    const configName = configNamer(ctx, orgId);
    const diffs = new Map(
      versions.map((v) => {
        const d = versionDiff(ctx, orgId, install.install_id, v.version_id) as DiffShape & { from_app_config_id: string | null };
        return [v.version_id, { ...d, from_name: configName(d.from_app_config_id) }];
      }),
    );
    const workflows = listInstallWorkflows(ctx, orgId, install.install_id).slice(0, 15);
    return render(c, {
      title: install.name,
      current: 'installs',
      children: (
        <>
          <p class="muted">
            <a href={paths.installs}>Installs</a> /
          </p>
          <h1>{install.name}</h1>
          <Section headingId="h-facts" title="Details">
            <InstallFacts install={install} refs={installRefs(ctx, orgId, install)} c={c} />
          </Section>
          <Section headingId="h-components" title="Components">
            {install.components.length ? (
              <ul>
                {install.components.map((cmp) => (
                  <li>
                    <a href={paths.component(install.install_id, cmp.component_id)}>{cmp.name}</a> <StatusBadge status={cmp.health} />{' '}
                    <LabelList labels={cmp.labels} />
                  </li>
                ))}
              </ul>
            ) : (
              <p class="muted">No components.</p>
            )}
          </Section>
          <Section headingId="h-config" title="Current config">
            <Json value={currentConfig(versions, install)} label="Current app config" />
          </Section>
          <Section headingId="h-rollback" title="Roll back">
            <RollbackForm install={install} choices={rollbackChoices(versions, install.app_config_id)} c={c} />
          </Section>
          <Section headingId="h-versions" title="Version history">
            <VersionHistory versions={versions} diffs={diffs} c={c} />
          </Section>
          <Section headingId="h-workflows" title="Workflows">
            <WorkflowsTable workflows={workflows} paths={paths} />
          </Section>
        </>
      ),
    });
  });
  registerInstallRollback(r, ctx);
  registerInstallParts(r, ctx);
}

/** An install's rollback: the plan, then apply. */
function registerInstallRollback(r: Hono<DashEnv>, ctx: AppContext) {
  r.post('/:org/installs/:install/rollback/plan', async (c) => {
    const orgId = c.req.param('org');
    const install = getInstallView(ctx, orgId, c.req.param('install'));
    const appConfigId = await formField(c, 'app_config_id');
    let plan;
    try {
      plan = updateInstallConfig(ctx, orgId, install.install_id, { app_config_id: appConfigId, plan_only: true }).body.plan;
    } catch (err) {
      return planFailed(c, install.install_id, err);
    }
    const paths = c.get('paths');
    const configName = configNamer(ctx, orgId);
    return render(c, {
      title: `Rollback plan · ${install.name}`,
      current: 'installs',
      children: (
        <>
          <p class="muted">
            <a href={paths.installs}>Installs</a> / <a href={paths.install(install.install_id)}>{install.name}</a> /
          </p>
          <h1>Rollback plan for {install.name}</h1>
          <section aria-labelledby="h-plan">
            <h2 id="h-plan">
              {configName(plan.from_app_config_id)} → {configName(plan.to_app_config_id)}
            </h2>
            <p class="muted">
              <span class="id">{plan.from_app_config_id ?? '—'}</span> → <span class="id">{plan.to_app_config_id}</span>
            </p>
            {plan.vetoed ? (
              <p class="step-error" role="alert">
                {configName(plan.to_app_config_id)} is vetoed: {plan.vetoed.reason}. Applying it will be refused; lift the veto on the{' '}
                <a href={paths.app(install.app_id)}>app's page</a> first.
              </p>
            ) : null}
            <Diff diff={plan as DiffShape} />
            <p class="hint">
              Applying reprovisions the sandbox if it changed, deploys only added or changed components and tears down removed ones.
            </p>
            <div class="actions">
              <form method="post" action={paths.rollbackApply(install.install_id)} class="inline">
                <Csrf token={csrfOf(c)} />
                <input type="hidden" name="app_config_id" value={plan.to_app_config_id} />
                <button type="submit">Apply rollback</button>
              </form>
              <a class="button secondary" href={paths.install(install.install_id)}>
                Cancel
              </a>
            </div>
          </section>
        </>
      ),
    });
  });

  r.post('/:org/installs/:install/rollback/apply', async (c) => {
    const orgId = c.req.param('org');
    const installId = c.req.param('install');
    getInstallView(ctx, orgId, installId);
    let res;
    try {
      const appConfigId = await formField(c, 'app_config_id');
      res = change(
        c,
        ctx,
        apiOp('updateInstallAppConfig'),
        { idOf: (x) => (x.body as { workflow_id: string }).workflow_id, status: 201 },
        () => updateInstallConfig(ctx, orgId, installId, { app_config_id: appConfigId }),
      );
    } catch (err) {
      return planFailed(c, installId, err);
    }
    const body = res.body as { workflow_id: string; version_id: string };
    flash(c, { kind: 'ok', text: `Rollback started: version ${body.version_id}.` });
    return c.redirect(c.get('paths').workflow(body.workflow_id), 303);
  });
}

/** An install's sandbox and component pages. */
function registerInstallParts(r: Hono<DashEnv>, ctx: AppContext) {
  r.get('/:org/installs/:install/sandbox', (c) => {
    const orgId = c.req.param('org');
    const install = getInstallView(ctx, orgId, c.req.param('install'));
    const paths = c.get('paths');
    const versions = listInstallVersions(ctx, orgId, install.install_id);
    const rows = stepsWhere(recentWorkflowViews(ctx, orgId, install.install_id), (s) => s.sandbox_id === install.sandbox_id);
    return render(c, {
      title: `Sandbox · ${install.name}`,
      current: 'installs',
      children: (
        <>
          <p class="muted">
            <a href={paths.installs}>Installs</a> / <a href={paths.install(install.install_id)}>{install.name}</a> /
          </p>
          <h1>Sandbox of {install.name}</h1>
          <Section headingId="h-sbx" title="Details">
            <dl class="facts">
              <CodeFact term="Sandbox ID" value={install.sandbox_id} />
              <FactLine term="Install">
                <a href={paths.install(install.install_id)}>{install.name}</a>
              </FactLine>
              <FactLine term="Provisioned">{install.provisioned ? 'yes' : 'no'}</FactLine>
            </dl>
            <h3>Sandbox config</h3>
            <Json value={currentConfig(versions, install)?.sandbox ?? {}} label="Sandbox config" />
          </Section>
          <Section headingId="h-sbx-runs" title="Runs">
            <StepHistory rows={rows} c={c} />
          </Section>
        </>
      ),
    });
  });

  r.get('/:org/installs/:install/components/:component', (c) => {
    const orgId = c.req.param('org');
    const install = getInstallView(ctx, orgId, c.req.param('install'));
    const componentId = c.req.param('component');
    const paths = c.get('paths');
    const rows = stepsWhere(recentWorkflowViews(ctx, orgId, install.install_id), (s) => s.component_id === componentId);
    const active = install.components.find((x) => x.component_id === componentId);
    // a component removed by a later config still has its page (event links stay valid)
    if (!active && !rows.length) throw new NotFoundError('component', componentId);
    const name = active?.name ?? componentNames(ctx, install.install_id).get(componentId) ?? rows[0].step.name.replace(/^\S+\s+/, '');
    const spec = currentConfig(listInstallVersions(ctx, orgId, install.install_id), install)?.components.find((x) => x.name === name);
    return render(c, {
      title: `${name} · ${install.name}`,
      current: 'installs',
      children: (
        <>
          <p class="muted">
            <a href={paths.installs}>Installs</a> / <a href={paths.install(install.install_id)}>{install.name}</a> /
          </p>
          <Heading title={`Component ${name}`} sub={`of ${install.name}`} />
          <Section headingId="h-cmp" title="Details">
            <dl class="facts">
              <CodeFact term="Component ID" value={componentId} />
              <FactLine term="Health">
                {active ? <StatusBadge status={active.health} /> : <span class="muted">not in the current config</span>}
              </FactLine>
              <FactLine term="Labels">
                <LabelList labels={active?.labels} />
              </FactLine>
            </dl>
            <h3>Spec in the current config</h3>
            <Json value={spec ?? null} label="Component spec" />
          </Section>
          <Section headingId="h-cmp-runs" title="Deploys and plans">
            <StepHistory rows={rows} c={c} />
          </Section>
        </>
      ),
    });
  });
}
