// Org overview: installs, recent workflows (installs', branch runs and fleet rollbacks, those
// waiting for an approval marked), webhooks count.
import type { Hono } from 'hono';
import type { AppContext } from '../../context.ts';
import { appNames, configVersion, orgName } from '../../services/names.ts';
import { listInstalls } from '../../services/installs.ts';
import type { WorkflowSummary } from '../../services/workflows.ts';
import { listWebhooks } from '../../services/webhooks.ts';
import { listRecentWorkflows } from '../../services/rollouts.ts';
import { listPendingApprovals } from '../../services/approvals.ts';
import type { Paths } from '../paths.ts';
import { render } from '../render.tsx';
import type { DashEnv } from '../session.ts';
import { RunCells, Section, StackTable, StatusBadge } from '../ui.tsx';

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
          <StatusBadge status={i.health} />
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

/** Who a workflow in a table is for: its name and link (an install, or an app for its rollouts). */
export interface WorkflowOwnerCell {
  text: string;
  href: string;
}

export const WorkflowsTable = ({
  workflows,
  paths,
  installNames,
  owners,
  awaiting,
}: {
  workflows: WorkflowSummary[];
  paths: Paths;
  installNames?: Map<string, string>;
  /** owners other than installs (branch runs, fleet rollbacks), by workflow id */
  owners?: Map<string, WorkflowOwnerCell>;
  /** workflows with a step waiting for approval */
  awaiting?: Set<string>;
}) => (
  <StackTable
    columns={['Workflow', installNames ? 'For' : null, 'Status', 'Created', 'Duration']}
    items={workflows}
    empty="No workflows yet."
    row={(w) => {
      const owner = owners?.get(w.workflow_id);
      return (
        <tr>
          <td data-label="Workflow">
            <a href={paths.workflow(w.workflow_id)}>{w.type}</a> <span class="muted">{w.workflow_id}</span>
            {awaiting?.has(w.workflow_id) ? (
              <>
                {' '}
                <a class="badge s-awaiting_approval" href={paths.approvals}>
                  awaiting approval
                </a>
              </>
            ) : null}
          </td>
          {installNames ? (
            <td data-label="For">
              {owner ? (
                <a href={owner.href}>{owner.text}</a>
              ) : (
                <a href={paths.install(w.owner_id)}>{installNames.get(w.owner_id) ?? w.owner_id}</a>
              )}
            </td>
          ) : null}
          <RunCells run={w} time={w.created_at} timeLabel="Created" />
        </tr>
      );
    }}
  />
);

/** How many workflows the overview lists (installs' workflows, branch runs and fleet rollbacks together). */
const RECENT = 10;

/**
 * The org's most recent workflows: its installs', its branch runs and its fleet rollbacks, newest first; who each is for; which wait for
 * an approval.
 */
function recentWorkflows(ctx: AppContext, orgId: string, paths: Paths) {
  const owners = new Map<string, WorkflowOwnerCell>();
  const apps = appNames(ctx, orgId);
  const listed = listRecentWorkflows(ctx, orgId, RECENT);
  for (const { workflow: w, owner } of listed) {
    if (owner.kind !== 'rollout') continue;
    const appName = apps.get(owner.app_id) ?? owner.app_id;
    const text = owner.fleet ? `fleet rollback of app ${appName}` : `branch ${owner.branch ?? '?'} of app ${appName}`;
    owners.set(w.workflow_id, { text, href: paths.app(owner.app_id) });
  }
  const awaiting = new Set(listPendingApprovals(ctx, orgId).map((p) => p.workflow.workflow_id));
  return { recent: listed.map((x) => x.workflow), owners, awaiting };
}

export function registerOverview(r: Hono<DashEnv>, ctx: AppContext) {
  r.get('/:org', (c) => {
    const orgId = c.req.param('org');
    const paths = c.get('paths');
    const org = orgName(ctx, orgId);
    const installs = listInstalls(ctx, orgId);
    const names = new Map(installs.map((i) => [i.install_id, i.name]));
    const { recent, owners, awaiting } = recentWorkflows(ctx, orgId, paths);
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
            <WorkflowsTable workflows={recent} paths={paths} installNames={names} owners={owners} awaiting={awaiting} />
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
