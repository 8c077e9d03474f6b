// CONTRACT 4.2: workflows, approvals, cancel.
import * as workflows from '../../services/workflows.ts';
import { defineRoute, readRoute, reply } from '../api-route.ts';
import { approvalInSchema, stepSchema, workflowSchema } from '../../schemas/workflows.ts';

const tag = 'workflows';

export const workflowRoutes = [
  readRoute(
    {
      operationId: 'getWorkflow',
      path: '/v1/workflows/{workflow_id}',
      tag,
      summary: 'Get a workflow with its steps',
      ok: ['the workflow', workflowSchema],
      errors: [404],
    },
    ({ ctx, orgId, params }) => workflows.getWorkflowView(ctx, orgId, params.workflow_id),
  ),
  defineRoute({
    operationId: 'respondToApproval',
    method: 'post',
    path: '/v1/workflows/{workflow_id}/steps/{step_id}/approval',
    tag,
    scope: 'deploy',
    audit: { action: 'steps.approve', actionOf: (b) => (b.response === 'rejected' ? 'steps.reject' : 'steps.approve'), resource: 'step' },
    summary: 'Approve or reject a step that awaits approval',
    before: ({ ctx, orgId, params }) => void workflows.getWorkflowView(ctx, orgId, params.workflow_id),
    body: { schema: approvalInSchema },
    responses: { 200: { description: 'the step', schema: stepSchema } },
    errors: [404, 409],
    handle: ({ ctx, orgId, params, body, actor }) =>
      reply.ok(workflows.respondToApproval(ctx, orgId, params.workflow_id, params.step_id, body.response, body.note, actor)),
  }),
  defineRoute({
    operationId: 'cancelWorkflow',
    method: 'post',
    path: '/v1/workflows/{workflow_id}/cancel',
    tag,
    scope: 'deploy',
    audit: { action: 'workflows.cancel', resource: 'workflow' },
    summary: 'Cancel a workflow (409 once it has ended)',
    responses: { 200: { description: 'the workflow', schema: workflowSchema } },
    errors: [404, 409],
    handle: ({ ctx, orgId, params }) => reply.ok(workflows.cancelWorkflow(ctx, orgId, params.workflow_id)),
  }),
];
