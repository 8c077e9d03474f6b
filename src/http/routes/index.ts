// Every /v1 route, served by src/http/app.ts and documented by src/http/openapi.ts.
import { defineRoute, reply, type ApiRoute } from '../api-route.ts';
import { openApiDocument } from '../openapi.ts';
import { openApiDocumentSchema } from '../../schemas/common.ts';
import { webhookRoutes } from './webhooks.ts';
import { appRoutes } from './apps.ts';
import { installRoutes } from './installs.ts';
import { workflowRoutes } from './workflows.ts';
import { eventRoutes } from './events.ts';
import { auditRoutes } from './audit.ts';
import { ingestRoutes } from './ingest.ts';
import { changeWindowRoutes } from './change-windows.ts';
import { eventTypeRoutes } from './event-types.ts';
import { approvalPolicyRoutes } from './approval-policies.ts';

const openApiRoute = defineRoute({
  operationId: 'getOpenApiDocument',
  method: 'get',
  path: '/v1/openapi.json',
  tag: 'meta',
  summary: 'This API description (no authentication)',
  scope: 'public',
  responses: { 200: { description: 'the OpenAPI 3.1 document', schema: openApiDocumentSchema } },
  errors: [],
  handle: () => reply.ok(openApiDocument(API_ROUTES)),
});

export const API_ROUTES: readonly ApiRoute[] = [
  openApiRoute,
  ...webhookRoutes,
  ...appRoutes,
  ...changeWindowRoutes,
  ...approvalPolicyRoutes,
  ...installRoutes,
  ...workflowRoutes,
  ...eventRoutes,
  ...eventTypeRoutes,
  ...ingestRoutes,
  ...auditRoutes,
];
