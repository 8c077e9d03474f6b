// OpenAPI 3.1 document of /v1, generated from the same zod schemas that validate requests.
import { z } from 'zod';
import * as s from './schemas.ts';
import { createWebhookBodySchema, patchWebhookBodySchema } from '../webhooks/subscription.ts';

type Op = { summary: string; body?: z.ZodType; status: number };

const ROUTES: Record<string, Record<string, Op>> = {
  '/v1/orgs/current/webhooks': {
    get: { summary: 'List webhooks, newest first', status: 200 },
    post: { summary: 'Create a webhook', body: createWebhookBodySchema, status: 201 },
  },
  '/v1/orgs/current/webhooks/{webhook_id}': {
    get: { summary: 'Get a webhook', status: 200 },
    patch: { summary: 'Update a webhook (subscription replaced wholesale; secret rotated or removed)', body: patchWebhookBodySchema, status: 200 },
    delete: { summary: 'Delete a webhook', status: 204 },
  },
  '/v1/orgs/current/webhooks/{webhook_id}/ping': { post: { summary: 'Send one ping event to this webhook', status: 200 } },
  '/v1/apps': { post: { summary: 'Create an app', body: s.createAppSchema, status: 201 } },
  '/v1/apps/{app_id}/configs': {
    get: { summary: 'List app configs, newest first', status: 200 },
    post: { summary: 'Create an app config (immutable, versioned)', body: s.appConfigSchema, status: 201 },
  },
  '/v1/apps/{app_id}/branches': { post: { summary: 'Create an app branch with ordered install groups', body: s.createBranchSchema, status: 201 } },
  '/v1/apps/{app_id}/branches/{app_branch_id}/runs': { post: { summary: 'Start an app branch run', body: s.branchRunSchema, status: 201 } },
  '/v1/installs': {
    get: { summary: 'List installs', status: 200 },
    post: { summary: 'Create an install and provision it', body: s.createInstallSchema, status: 201 },
  },
  '/v1/installs/{install_id}': { get: { summary: 'Get an install', status: 200 } },
  '/v1/installs/{install_id}/workflows': { get: { summary: "List an install's workflows, newest first", status: 200 } },
  '/v1/installs/{install_id}/reprovision': { post: { summary: 'Start a reprovision workflow', status: 201 } },
  '/v1/installs/{install_id}/deprovision': { post: { summary: 'Start a deprovision workflow', status: 201 } },
  '/v1/installs/{install_id}/sandbox/reprovision': { post: { summary: 'Reprovision the sandbox', status: 201 } },
  '/v1/installs/{install_id}/components/{component_id}/deploy': { post: { summary: 'Deploy a component', status: 201 } },
  '/v1/installs/{install_id}/components/{component_id}/teardown': { post: { summary: 'Tear down a component', status: 201 } },
  '/v1/installs/{install_id}/actions/{action_id}/runs': { post: { summary: 'Run an action', body: s.actionRunSchema, status: 201 } },
  '/v1/installs/{install_id}/drift-scans': { post: { summary: 'Start a drift scan', body: s.driftScanSchema, status: 201 } },
  '/v1/installs/{install_id}/inputs': { patch: { summary: 'Update inputs', body: s.inputsUpdateSchema, status: 201 } },
  '/v1/installs/{install_id}/secrets/sync': { post: { summary: 'Sync secrets', status: 201 } },
  '/v1/installs/{install_id}/app-config-versions': { get: { summary: 'App config version history, newest first', status: 200 } },
  '/v1/installs/{install_id}/app-config-versions/{version_id}/diff': { get: { summary: 'What a version changed', status: 200 } },
  '/v1/installs/{install_id}/app-config-updates': { post: { summary: 'Plan or apply an app config', body: s.configUpdateSchema, status: 201 } },
  '/v1/workflows/{workflow_id}': { get: { summary: 'Get a workflow with its steps', status: 200 } },
  '/v1/workflows/{workflow_id}/steps/{step_id}/approval': { post: { summary: 'Approve or reject a step', body: s.approvalSchema, status: 200 } },
  '/v1/workflows/{workflow_id}/cancel': { post: { summary: 'Cancel a workflow', status: 200 } },
};

const ERROR = {
  type: 'object',
  required: ['error', 'message'],
  properties: { error: { type: 'string' }, message: { type: 'string' }, details: { type: 'array', items: { type: 'object' } } },
};

let cached: unknown;

export function openApiDocument(): unknown {
  if (cached) return cached;
  const paths: Record<string, unknown> = {};
  for (const [path, ops] of Object.entries(ROUTES)) {
    const params = [...path.matchAll(/\{(\w+)\}/g)].map((m) => ({ name: m[1], in: 'path', required: true, schema: { type: 'string' } }));
    const item: Record<string, unknown> = {};
    for (const [method, op] of Object.entries(ops)) {
      item[method] = {
        summary: op.summary,
        ...(params.length ? { parameters: params } : {}),
        ...(op.body ? { requestBody: { required: true, content: { 'application/json': { schema: z.toJSONSchema(op.body, { io: 'input', unrepresentable: 'any' }) } } } } : {}),
        responses: {
          [String(op.status)]: { description: 'success' },
          default: { description: 'error (CONTRACT 3)', content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } },
        },
      };
    }
    paths[path] = item;
  }
  cached = {
    openapi: '3.1.0',
    info: { title: 'svc API', version: '1' },
    components: {
      schemas: { Error: ERROR },
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer' }, org: { type: 'apiKey', in: 'header', name: 'X-Svc-Org-ID' } },
    },
    security: [{ bearer: [], org: [] }],
    paths,
  };
  return cached;
}
