// CONTRACT 4.2 and 4.3: apps, their configs and branches, and branch runs.
import * as catalog from '../../services/catalog.ts';
import { startBranchRun } from '../../services/rollback.ts';
import { defineRoute, reply } from '../route.ts';
import { appConfigSchema, branchRunSchema, createAppSchema, createBranchSchema } from '../schemas.ts';
import { appConfigListSchema, appConfigViewSchema, appSchema, branchRunResultSchema, branchSchema } from '../responses.ts';

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
    summary: 'Start an app branch run (an app_branch_run workflow over the install groups)',
    body: { schema: branchRunSchema },
    responses: { 201: { description: 'the run and its workflow', schema: branchRunResultSchema } },
    errors: [404],
    handle: ({ ctx, orgId, params, body }) => reply.created(startBranchRun(ctx, orgId, params.app_id, params.app_branch_id, body)),
  }),
];
