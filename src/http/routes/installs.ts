// CONTRACT 4.2 and 4.3: installs, the workflows that act on them, their config versions and updates.
import * as installs from '../../services/installs.ts';
import type { InstallWorkflowType } from '../../engine/definitions.ts';
import * as rollback from '../../services/rollback.ts';
import { creates, defineRoute, readRoute, reply, type ApiRoute, type ErrorStatus, type RouteArgs } from '../api-route.ts';
import {
  actionRunSchema,
  configUpdateSchema,
  createInstallSchema,
  driftScanSchema,
  inputsUpdateSchema,
  installListSchema,
  installSchema,
} from '../../schemas/installs.ts';
import { configUpdateAppliedSchema, configUpdatePlannedSchema, versionDiffSchema, versionListSchema } from '../../schemas/rollbacks.ts';
import { workflowSchema, workflowSummaryListSchema } from '../../schemas/workflows.ts';

const tag = 'installs';
const INSTALL = '/v1/installs/{install_id}';
/** What a route that starts a workflow of the install states: its tag and scope, its audit (the workflow started), its 201 and 404. */
const startsWorkflow = (action: string, type: InstallWorkflowType) => ({
  tag,
  scope: 'deploy' as const,
  ...creates(action, 'workflow', 'workflow_id', `the ${type} workflow`, workflowSchema),
  errors: [404] as ErrorStatus[],
});

/** 404 before the body is read when the install is not the org's. */
const installExists = ({ ctx, orgId, params }: Pick<RouteArgs<'{install_id}'>, 'ctx' | 'orgId' | 'params'>) =>
  void installs.mustGetInstall(ctx, orgId, params.install_id);

/** Routes that start a workflow of the install and take no body. */
function simpleWorkflowRoute(operationId: string, suffix: string, type: InstallWorkflowType, action: string, summary: string): ApiRoute {
  return defineRoute({
    operationId,
    method: 'post',
    path: `${INSTALL}${suffix}`,
    ...startsWorkflow(action, type),
    summary,
    handle: ({ ctx, orgId, params }) => reply.created(installs.startInstallWorkflow(ctx, orgId, params.install_id, type)),
  });
}

/** Routes that start a workflow of one of the install's components (deploy, teardown). */
function componentWorkflowRoute(verb: string, type: 'manual_deploy' | 'teardown_component', summary: string): ApiRoute {
  return defineRoute({
    operationId: `${verb}Component`,
    method: 'post',
    path: `${INSTALL}/components/{component_id}/${verb}`,
    ...startsWorkflow(`components.${verb}`, type),
    summary,
    handle: ({ ctx, orgId, params }) =>
      reply.created(installs.startInstallWorkflow(ctx, orgId, params.install_id, type, { component_id: params.component_id })),
  });
}

export const installRoutes = [
  readRoute(
    {
      operationId: 'listInstalls',
      path: '/v1/installs',
      tag,
      summary: 'List installs',
      ok: ['the installs of the org', installListSchema],
      errors: [],
    },
    ({ ctx, orgId }) => installs.listInstalls(ctx, orgId),
  ),
  defineRoute({
    operationId: 'createInstall',
    method: 'post',
    path: '/v1/installs',
    tag,
    scope: 'deploy',
    ...creates('installs.create', 'install', 'install_id', 'the install', installSchema),
    summary: 'Create an install and start its provision workflow (latest config when none is named)',
    body: { schema: createInstallSchema },
    errors: [404, 409],
    handle: ({ ctx, orgId, body }) => reply.created(installs.createInstall(ctx, orgId, body)),
  }),
  readRoute(
    { operationId: 'getInstall', path: INSTALL, tag, summary: 'Get an install', ok: ['the install', installSchema], errors: [404] },
    (a) => installs.getInstallView(a.ctx, a.orgId, a.params.install_id),
  ),
  readRoute(
    {
      operationId: 'listInstallWorkflows',
      path: `${INSTALL}/workflows`,
      tag,
      summary: "List an install's workflows, newest first",
      ok: ['the workflows (without steps)', workflowSummaryListSchema],
      errors: [404],
    },
    ({ ctx, orgId, params }) => installs.listInstallWorkflows(ctx, orgId, params.install_id),
  ),
  simpleWorkflowRoute('reprovisionInstall', '/reprovision', 'reprovision', 'installs.reprovision', 'Start a reprovision workflow'),
  simpleWorkflowRoute('deprovisionInstall', '/deprovision', 'deprovision', 'installs.deprovision', 'Start a deprovision workflow'),
  simpleWorkflowRoute(
    'reprovisionSandbox',
    '/sandbox/reprovision',
    'reprovision_sandbox',
    'sandboxes.reprovision',
    'Reprovision the sandbox',
  ),
  simpleWorkflowRoute(
    'deprovisionSandbox',
    '/sandbox/deprovision',
    'deprovision_sandbox',
    'sandboxes.deprovision',
    'Deprovision the sandbox',
  ),
  simpleWorkflowRoute('syncInstallSecrets', '/secrets/sync', 'sync_secrets', 'installs.sync_secrets', 'Sync secrets'),
  componentWorkflowRoute('deploy', 'manual_deploy', 'Deploy a component'),
  componentWorkflowRoute('teardown', 'teardown_component', 'Tear down a component'),
  defineRoute({
    operationId: 'runAction',
    method: 'post',
    path: `${INSTALL}/actions/{action_id}/runs`,
    ...startsWorkflow('actions.run', 'action_workflow_run'),
    summary: 'Run an action',
    description: 'A run missing an input that the action declares required still starts; its step fails naming the input.',
    before: installExists,
    body: { schema: actionRunSchema, optional: true },
    handle: ({ ctx, orgId, params, body }) =>
      reply.created(
        installs.startInstallWorkflow(ctx, orgId, params.install_id, 'action_workflow_run', {
          action_id: params.action_id,
          inputs: body.inputs ?? {},
        }),
      ),
  }),
  defineRoute({
    operationId: 'startDriftScan',
    method: 'post',
    path: `${INSTALL}/drift-scans`,
    ...startsWorkflow('installs.drift_scan', 'drift_run'),
    summary: 'Start a drift scan (drift_run, or drift_run_reprovision_sandbox with sandbox: true)',
    before: installExists,
    body: { schema: driftScanSchema, optional: true },
    handle: ({ ctx, orgId, params, body }) =>
      reply.created(
        installs.startInstallWorkflow(ctx, orgId, params.install_id, body.sandbox ? 'drift_run_reprovision_sandbox' : 'drift_run'),
      ),
  }),
  defineRoute({
    operationId: 'updateInstallInputs',
    method: 'patch',
    path: `${INSTALL}/inputs`,
    ...startsWorkflow('installs.update_inputs', 'input_update'),
    summary: 'Update inputs',
    before: installExists,
    body: { schema: inputsUpdateSchema },
    handle: ({ ctx, orgId, params, body }) =>
      reply.created(installs.startInstallWorkflow(ctx, orgId, params.install_id, 'input_update', { inputs: body.inputs })),
  }),
  readRoute(
    {
      operationId: 'listAppConfigVersions',
      path: `${INSTALL}/app-config-versions`,
      tag,
      summary: "The install's app config version history, newest first",
      ok: ['the versions', versionListSchema],
      errors: [404],
    },
    ({ ctx, orgId, params }) => rollback.listInstallVersions(ctx, orgId, params.install_id),
  ),
  readRoute(
    {
      operationId: 'getAppConfigVersionDiff',
      path: `${INSTALL}/app-config-versions/{version_id}/diff`,
      tag,
      summary: 'What a version changed',
      ok: ['the diff from the previous version', versionDiffSchema],
      errors: [404],
    },
    ({ ctx, orgId, params }) => rollback.versionDiff(ctx, orgId, params.install_id, params.version_id),
  ),
  defineRoute({
    operationId: 'updateInstallAppConfig',
    method: 'post',
    path: `${INSTALL}/app-config-updates`,
    tag,
    scope: 'deploy',
    audit: {
      action: 'installs.update_app_config',
      resource: 'workflow',
      id: (r) => (r.status === 201 ? r.body.workflow_id : undefined),
      unchanged: (r) => r.status === 200,
    },
    summary: 'Plan (plan_only) or apply an app config: a rollback or a roll forward',
    before: installExists,
    body: { schema: configUpdateSchema },
    responses: {
      200: { description: 'plan_only: the plan; nothing changed and no workflow started', schema: configUpdatePlannedSchema },
      201: { description: 'applied: an app_config_update workflow and a new version', schema: configUpdateAppliedSchema },
    },
    errors: [404, 409],
    handle: ({ ctx, orgId, params, body }) => rollback.updateInstallConfig(ctx, orgId, params.install_id, body),
  }),
];
