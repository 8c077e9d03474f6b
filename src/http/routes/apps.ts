// CONTRACT 4.2 and 4.3: apps, their configs and branches, and branch runs.
import type { AppContext } from '../../context.ts';
import { runInTurns, type Sliced } from '../../engine/turns.ts';
import * as catalog from '../../services/catalog.ts';
import { planFleetRollbackInTurns, rollBackFleet, startBranchRun } from '../../services/rollback.ts';
import { creates, defineRoute, documented, readRoute, reply, type RouteArgs } from '../api-route.ts';
import {
  appConfigListSchema,
  appConfigSchema,
  appConfigViewSchema,
  appListQuerySchema,
  appListSchema,
  appSchema,
  branchSchema,
  createAppSchema,
  createBranchSchema,
  vetoSchema,
} from '../../schemas/apps.ts';
import {
  branchRunResultSchema,
  branchRunSchema,
  fleetRollbackPlannedSchema,
  fleetRollbackSchema,
  fleetRollbackStartedSchema,
  plannedInstallSchema,
  skippedInstallSchema,
} from '../../schemas/rollbacks.ts';

const CONFIG = '/v1/apps/{app_id}/configs/{app_config_id}';

const tag = 'apps';

type Planned = Awaited<ReturnType<typeof planFleetRollbackInTurns>>['body'];

/**
 * A fleet rollback's plan_only answer, checked against its documented schema and written out one
 * install at a time, in turns of the engine's thread (CONTRACT §8): checking and writing a plan of
 * 1,000 installs at once held the thread for 20-80 ms.
 */
function* plannedText(ctx: AppContext, planned: Planned): Sliced<string> {
  const op = 'rollBackAppFleet';
  const installs: string[] = [];
  for (const i of planned.plan.installs) {
    installs.push(JSON.stringify(documented(ctx, op, plannedInstallSchema, i)));
    yield;
  }
  const skipped: string[] = [];
  for (const s of planned.plan.skipped) {
    skipped.push(JSON.stringify(documented(ctx, op, skippedInstallSchema, s)));
    yield;
  }
  return `{"plan":{"installs":[${installs.join(',')}],"skipped":[${skipped.join(',')}]},"applied":false}`;
}

/** 404 before the body is read when the app is not the org's. */
const appExists = ({ ctx, orgId, params }: Pick<RouteArgs<'{app_id}'>, 'ctx' | 'orgId' | 'params'>) =>
  void catalog.mustGetApp(ctx, orgId, params.app_id);

export const appRoutes = [
  defineRoute({
    operationId: 'createApp',
    method: 'post',
    path: '/v1/apps',
    tag,
    scope: 'deploy',
    ...creates('apps.create', 'app', 'app_id', 'the app', appSchema),
    summary: 'Create an app',
    body: { schema: createAppSchema },
    errors: [],
    handle: ({ ctx, orgId, body }) => reply.created(catalog.createApp(ctx, orgId, body.name)),
  }),
  readRoute(
    {
      operationId: 'listApps',
      path: '/v1/apps',
      tag,
      summary: "List the org's apps, newest first",
      description: 'A page of at most `limit` apps (default 100); the next page is `after` the last app_id of this one.',
      query: appListQuerySchema,
      ok: ['the apps', appListSchema],
      errors: [400],
    },
    ({ ctx, orgId, query }) => catalog.listAppsPage(ctx, orgId, query),
  ),
  readRoute(
    { operationId: 'getApp', path: '/v1/apps/{app_id}', tag, summary: 'Get an app', ok: ['the app', appSchema], errors: [404] },
    (a) => catalog.mustGetApp(a.ctx, a.orgId, a.params.app_id),
  ),
  defineRoute({
    operationId: 'createAppConfig',
    method: 'post',
    path: '/v1/apps/{app_id}/configs',
    tag,
    scope: 'deploy',
    ...creates('configs.create', 'app_config', 'app_config_id', 'the app config', appConfigViewSchema),
    summary: 'Create an app config (immutable; versions count 1, 2, 3 per app)',
    before: appExists,
    body: { schema: appConfigSchema },
    errors: [404],
    handle: ({ ctx, orgId, params, body }) => reply.created(catalog.createConfig(ctx, orgId, params.app_id, body)),
  }),
  readRoute(
    {
      operationId: 'listAppConfigs',
      path: '/v1/apps/{app_id}/configs',
      tag,
      summary: "List an app's configs, newest first",
      ok: ['the app configs', appConfigListSchema],
      errors: [404],
    },
    ({ ctx, orgId, params }) => catalog.listConfigs(ctx, orgId, params.app_id),
  ),
  defineRoute({
    operationId: 'createAppBranch',
    method: 'post',
    path: '/v1/apps/{app_id}/branches',
    tag,
    scope: 'deploy',
    ...creates('branches.create', 'app_branch', 'app_branch_id', 'the app branch', branchSchema),
    summary: 'Create an app branch with ordered install groups',
    before: appExists,
    body: { schema: createBranchSchema },
    errors: [404],
    handle: ({ ctx, orgId, params, body }) => reply.created(catalog.createBranch(ctx, orgId, params.app_id, body)),
  }),
  defineRoute({
    operationId: 'startAppBranchRun',
    method: 'post',
    path: '/v1/apps/{app_id}/branches/{app_branch_id}/runs',
    tag,
    scope: 'deploy',
    ...creates('branch_runs.create', 'run', 'run_id', 'the run and its workflow', branchRunResultSchema),
    summary: 'Start an app branch run (an app_branch_run workflow over the install groups), health-gated with health_gate',
    body: { schema: branchRunSchema },
    errors: [404, 409],
    handle: ({ ctx, orgId, params, body, actor }) =>
      reply.created(startBranchRun(ctx, orgId, params.app_id, params.app_branch_id, body, actor)),
  }),
  defineRoute({
    operationId: 'rollBackAppFleet',
    method: 'post',
    path: '/v1/apps/{app_id}/rollbacks',
    tag,
    scope: 'deploy',
    audit: {
      action: 'rollbacks.create',
      resource: 'rollback',
      id: (r) => (r.status === 201 ? r.body.run_id : undefined),
      unchanged: (r) => r.status === 200,
    },
    summary: "Roll back an app's installs: to each one's previous config or to one config, group by group",
    description:
      'plan_only: the plan (per install the move and its diff; installs left out with why). ' +
      'Otherwise an app_rollback workflow owned by the app over the selected installs (all of them ' +
      "when neither install_ids nor selector), grouped as the app's branch groups group them " +
      '(installs in no group last, as `other`): each group planned (an approval step unless approval ' +
      'is none), deployed and, with health_gate, baked. 409 vetoed when a target config is vetoed; ' +
      '409 conflict when no install is left to roll back.',
    before: appExists,
    body: { schema: fleetRollbackSchema },
    responses: {
      200: { description: 'plan_only: the plan, nothing applied', schema: fleetRollbackPlannedSchema },
      201: { description: 'the app_rollback run and its plan', schema: fleetRollbackStartedSchema },
    },
    errors: [404, 409],
    // plan_only changes nothing: worked out before the change, in turns of the engine's thread (CONTRACT §8)
    prepare: async ({ ctx, orgId, params, body }) => {
      if (!body.plan_only) return null;
      const planned = await planFleetRollbackInTurns(ctx, orgId, params.app_id, body);
      return reply.okJsonText<Planned>(await runInTurns(plannedText(ctx, planned.body)));
    },
    handle: ({ ctx, orgId, params, body, prepared, actor }) => prepared ?? rollBackFleet(ctx, orgId, params.app_id, body, actor),
  }),
  defineRoute({
    operationId: 'vetoAppConfig',
    method: 'post',
    path: `${CONFIG}/veto`,
    tag,
    scope: 'deploy',
    audit: { action: 'configs.veto', resource: 'app_config' },
    summary: 'Veto an app config: applying it is 409 vetoed until the veto is lifted',
    before: ({ ctx, orgId, params }) => void catalog.mustGetAppConfig(ctx, orgId, params.app_id, params.app_config_id),
    body: { schema: vetoSchema },
    responses: { 200: { description: 'the app config, vetoed', schema: appConfigViewSchema } },
    errors: [404],
    handle: ({ ctx, orgId, params, body }) => reply.ok(catalog.vetoConfig(ctx, orgId, params.app_id, params.app_config_id, body.reason)),
  }),
  defineRoute({
    operationId: 'unvetoAppConfig',
    method: 'delete',
    path: `${CONFIG}/veto`,
    tag,
    scope: 'deploy',
    audit: { action: 'configs.unveto', resource: 'app_config' },
    summary: "Lift an app config's veto",
    responses: { 200: { description: 'the app config, vetoed: null', schema: appConfigViewSchema } },
    errors: [404],
    handle: ({ ctx, orgId, params }) => reply.ok(catalog.unvetoConfig(ctx, orgId, params.app_id, params.app_config_id)),
  }),
];
