// CONTRACT 4.2 and 4.3: apps, their configs and branches, and branch runs.
import * as catalog from '../../services/catalog.ts';
import { rollBackFleet, startBranchRun } from '../../services/rollback.ts';
import { defineRoute, reply } from '../api-route.ts';
import { appConfigSchema, branchRunSchema, createAppSchema, createBranchSchema, fleetRollbackSchema, vetoSchema } from '../schemas.ts';
import {
  appConfigListSchema,
  appConfigViewSchema,
  appSchema,
  branchRunResultSchema,
  branchSchema,
  fleetRollbackPlannedSchema,
  fleetRollbackStartedSchema,
} from '../responses.ts';

const CONFIG = '/v1/apps/{app_id}/configs/{app_config_id}';

const tag = 'apps';

export const appRoutes = [
  defineRoute({
    operationId: 'createApp',
    method: 'post',
    path: '/v1/apps',
    tag,
    summary: 'Create an app',
    body: { schema: createAppSchema },
    responses: { 201: { description: 'the app', schema: appSchema } },
    errors: [],
    handle: ({ ctx, orgId, body }) => reply.created(catalog.createApp(ctx, orgId, body.name)),
  }),
  defineRoute({
    operationId: 'getApp',
    method: 'get',
    path: '/v1/apps/{app_id}',
    tag,
    summary: 'Get an app',
    responses: { 200: { description: 'the app', schema: appSchema } },
    errors: [404],
    handle: ({ ctx, orgId, params }) => reply.ok(catalog.mustGetApp(ctx, orgId, params.app_id)),
  }),
  defineRoute({
    operationId: 'createAppConfig',
    method: 'post',
    path: '/v1/apps/{app_id}/configs',
    tag,
    summary: 'Create an app config (immutable; versions count 1, 2, 3 per app)',
    before: ({ ctx, orgId, params }) => void catalog.mustGetApp(ctx, orgId, params.app_id),
    body: { schema: appConfigSchema },
    responses: { 201: { description: 'the app config', schema: appConfigViewSchema } },
    errors: [404],
    handle: ({ ctx, orgId, params, body }) => reply.created(catalog.createConfig(ctx, orgId, params.app_id, body)),
  }),
  defineRoute({
    operationId: 'listAppConfigs',
    method: 'get',
    path: '/v1/apps/{app_id}/configs',
    tag,
    summary: "List an app's configs, newest first",
    responses: { 200: { description: 'the app configs', schema: appConfigListSchema } },
    errors: [404],
    handle: ({ ctx, orgId, params }) => reply.ok(catalog.listConfigs(ctx, orgId, params.app_id)),
  }),
  defineRoute({
    operationId: 'createAppBranch',
    method: 'post',
    path: '/v1/apps/{app_id}/branches',
    tag,
    summary: 'Create an app branch with ordered install groups',
    before: ({ ctx, orgId, params }) => void catalog.mustGetApp(ctx, orgId, params.app_id),
    body: { schema: createBranchSchema },
    responses: { 201: { description: 'the app branch', schema: branchSchema } },
    errors: [404],
    handle: ({ ctx, orgId, params, body }) => reply.created(catalog.createBranch(ctx, orgId, params.app_id, body)),
  }),
  defineRoute({
    operationId: 'startAppBranchRun',
    method: 'post',
    path: '/v1/apps/{app_id}/branches/{app_branch_id}/runs',
    tag,
    summary: 'Start an app branch run (an app_branch_run workflow over the install groups), health-gated with health_gate',
    body: { schema: branchRunSchema },
    responses: { 201: { description: 'the run and its workflow', schema: branchRunResultSchema } },
    errors: [404, 409],
    handle: ({ ctx, orgId, params, body }) => reply.created(startBranchRun(ctx, orgId, params.app_id, params.app_branch_id, body)),
  }),
  defineRoute({
    operationId: 'rollBackAppFleet',
    method: 'post',
    path: '/v1/apps/{app_id}/rollbacks',
    tag,
    summary: "Roll back an app's installs: to each one's previous config or to one config, group by group",
    description:
      'plan_only: the plan (per install the move and its diff; installs left out with why). Otherwise an app_rollback workflow owned by the app over the selected installs (all of them when neither install_ids nor selector), grouped as the app\'s branch groups group them (installs in no group last, as `other`): each group planned (an approval step unless approval is none), deployed and, with health_gate, baked. 409 vetoed when a target config is vetoed; 409 conflict when no install is left to roll back.',
    before: ({ ctx, orgId, params }) => void catalog.mustGetApp(ctx, orgId, params.app_id),
    body: { schema: fleetRollbackSchema },
    responses: {
      200: { description: 'plan_only: the plan, nothing applied', schema: fleetRollbackPlannedSchema },
      201: { description: 'the app_rollback run and its plan', schema: fleetRollbackStartedSchema },
    },
    errors: [404, 409],
    handle: ({ ctx, orgId, params, body }) => rollBackFleet(ctx, orgId, params.app_id, body),
  }),
  defineRoute({
    operationId: 'vetoAppConfig',
    method: 'post',
    path: `${CONFIG}/veto`,
    tag,
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
    summary: "Lift an app config's veto",
    responses: { 200: { description: 'the app config, vetoed: null', schema: appConfigViewSchema } },
    errors: [404],
    handle: ({ ctx, orgId, params }) => reply.ok(catalog.unvetoConfig(ctx, orgId, params.app_id, params.app_config_id)),
  }),
];
