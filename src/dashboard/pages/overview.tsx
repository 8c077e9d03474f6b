// Org overview: installs, recent workflows, webhooks count.
import type { Hono } from 'hono';
import type { AppContext } from '../../context.ts';
import { appNames, configVersion, orgName } from '../../services/names.ts';
import { listInstalls, listInstallWorkflows } from '../../services/installs.ts';
import type { WorkflowSummary } from '../../services/workflows.ts';
import { listWebhooks } from '../../services/webhooks.ts';
import type { Paths } from '../paths.ts';
import { render } from '../render.tsx';
import type { DashEnv } from '../session.ts';
import { RunCells, Section, StackTable, Status } from '../ui.tsx';

export type InstallRow = ReturnType<typeof listInstalls>[number];

/** App names and config version numbers of the installs in a table. */
export interface InstallNames {
  apps: Map<string, string>;
  configs: Map<string, number>;
}

export function installNamesOf(ctx: AppContext, orgId: string, installs: InstallRow[]): InstallNames {
  const apps = appNames(ctx, orgId);
  const configs = new Map<string, number>();
  for (const i of installs) {
    if (!i.app_config_id || configs.has(i.app_config_id)) continue;
    const version = configVersion(ctx, orgId, i.app_config_id);
    if (version !== null) configs.set(i.app_config_id, version);
  }
  return { apps, configs };
}

export const InstallsTable = ({ installs, paths, names }: { installs: InstallRow[]; paths: Paths; names: InstallNames }) => (
  <StackTable
    columns={['Install', 'App', 'Health', 'Provisioned', 'App config', 'Components']}
    items={installs}
    empty="No installs yet. Create one with the API: POST /v1/installs."
    row={(i) => (
      <tr>
        <td data-label="Install">
          <a href={paths.install(i.install_id)}>{i.name}</a> <span class="muted">{i.install_id}</span>
        </td>
        <td data-label="App">{names.apps.get(i.app_id) ?? <code>{i.app_id}</code>}</td>
        <td data-label="Health">
          <Status status={i.health} />
        </td>
        <td data-label="Provisioned">{i.provisioned ? 'yes' : 'no'}</td>
        <td data-label="App config">
          {i.app_config_id ? (
            <>
              {names.configs.has(i.app_config_id) ? `v${names.configs.get(i.app_config_id)} ` : null}
              <span class="muted id">{i.app_config_id}</span>
            </>
          ) : (
            '—'
          )}
        </td>
        <td data-label="Components">{i.components.length}</td>
      </tr>
    )}
  />
);

export const WorkflowsTable = ({ workflows, paths, installNames }: { workflows: WorkflowSummary[]; paths: Paths; installNames?: Map<string, string> }) => (
  <StackTable
    columns={['Workflow', installNames ? 'Install' : null, 'Status', 'Created', 'Duration']}
    items={workflows}
    empty="No workflows yet."
    row={(w) => (
      <tr>
        <td data-label="Workflow">
          <a href={paths.workflow(w.workflow_id)}>{w.type}</a> <span class="muted">{w.workflow_id}</span>
        </td>
        {installNames ? (
          <td data-label="Install">
            <a href={paths.install(w.owner_id)}>{installNames.get(w.owner_id) ?? w.owner_id}</a>
          </td>
        ) : null}
        <RunCells run={w} time={w.created_at} timeLabel="Created" />
      </tr>
    )}
  />
);

export function registerOverview(r: Hono<DashEnv>, ctx: AppContext) {
  r.get('/:org', (c) => {
    const orgId = c.req.param('org');
    const paths = c.get('paths');
    const org = orgName(ctx, orgId);
    const installs = listInstalls(ctx, orgId);
    const names = new Map(installs.map((i) => [i.install_id, i.name]));
    const recent = installs
      .flatMap((i) => listInstallWorkflows(ctx, orgId, i.install_id))
      .sort((a, b) => (a.created_at < b.created_at ? 1 : a.created_at > b.created_at ? -1 : 0))
      .slice(0, 10);
    const webhooks = listWebhooks(ctx, orgId).length;
    return render(c, {
      title: org ?? orgId,
      current: 'overview',
      children: (
        <>
          <h1>
            {org ?? orgId} <span class="muted">{orgId}</span>
          </h1>
          <Section headingId="h-installs" title={`Installs (${installs.length})`}>
            <InstallsTable installs={installs} paths={paths} names={installNamesOf(ctx, orgId, installs)} />
          </Section>
          <Section headingId="h-recent" title="Recent workflows">
            <WorkflowsTable workflows={recent} paths={paths} installNames={names} />
          </Section>
          <Section headingId="h-webhooks" title="Webhooks">
            <p>
              {webhooks === 1 ? '1 webhook' : `${webhooks} webhooks`} registered. <a href={paths.webhooks}>Manage webhooks</a>
            </p>
          </Section>
        </>
      ),
    });
  });
}
