// CONTRACT 10.4: an app's approval policy, the steps awaiting approval, one-time approval links.
import * as policies from '../../services/approval-policies.ts';
import { mustGetApp } from '../../services/catalog.ts';
import { defineRoute, deleteRoute, readRoute, reply } from '../api-route.ts';
import { approvalLinkInSchema, approvalLinkSchema, approvalPolicyInSchema, approvalPolicySchema } from '../../schemas/approval-policies.ts';
import { pendingApprovalListSchema } from '../../schemas/workflows.ts';
import { createApprovalLink } from '../../services/approval-links.ts';
import { listPendingApprovals } from '../../services/approvals.ts';
import { getWorkflowView } from '../../services/workflows.ts';

const POLICY = '/v1/apps/{app_id}/approval-policy';
const tag = 'apps';

export const approvalPolicyRoutes = [
  defineRoute({
    operationId: 'putApprovalPolicy',
    method: 'put',
    path: POLICY,
    tag,
    scope: 'deploy',
    audit: { action: 'approval_policies.put', resource: 'app' },
    summary: "Set an app's approval policy: who must approve its runs' approval steps, how many, for how long",
    description:
      'rules: every rule must have `required` (1–10) distinct approvers it admits (by token_ids, token_names or scopes); ' +
      'prevent_self_approval (default true): the token that started the run may not approve; expires_after (1m–30d): then the ' +
      'step fails approval_expired; reject: any (default) or majority; auto_approve: no_changes or no_destructive. ' +
      'A rule whose token_ids name no live token of the org, or whose approvers is empty, is 400 naming the rule. ' +
      'Applies at once to the steps still waiting.',
    before: ({ ctx, orgId, params }) => void mustGetApp(ctx, orgId, params.app_id),
    body: { schema: approvalPolicyInSchema },
    responses: { 200: { description: 'the policy', schema: approvalPolicySchema } },
    errors: [400, 404],
    handle: ({ ctx, orgId, params, body }) => reply.ok(policies.putApprovalPolicy(ctx, orgId, params.app_id, body)),
  }),
  readRoute(
    {
      operationId: 'getApprovalPolicy',
      path: POLICY,
      tag,
      summary: "Get an app's approval policy (404 when it has none)",
      ok: ['the policy', approvalPolicySchema],
      errors: [404],
    },
    ({ ctx, orgId, params }) => policies.getApprovalPolicy(ctx, orgId, params.app_id),
  ),
  deleteRoute({
    operationId: 'deleteApprovalPolicy',
    path: POLICY,
    tag,
    scope: 'deploy',
    audit: { action: 'approval_policies.delete', resource: 'app' },
    summary: "Remove an app's approval policy (its waiting steps then take one response, as without a policy)",
    remove: ({ ctx, orgId, params }) => policies.deleteApprovalPolicy(ctx, orgId, params.app_id),
  }),
  readRoute(
    {
      operationId: 'listPendingApprovals',
      path: '/v1/approvals',
      tag: 'workflows',
      summary: 'List the steps awaiting approval in the org, oldest workflow first, each with its workflow (svc approvals list)',
      ok: ['the steps awaiting approval', pendingApprovalListSchema],
      errors: [],
    },
    ({ ctx, orgId }) => ({ data: listPendingApprovals(ctx, orgId) }),
  ),
  defineRoute({
    operationId: 'createApprovalLink',
    method: 'post',
    path: '/v1/workflows/{workflow_id}/steps/{step_id}/approval-links',
    tag: 'workflows',
    scope: 'admin',
    audit: { action: 'approval_links.create', resource: 'step' },
    summary: 'Make a one-time approval link for a step awaiting approval, answering as a token (for chat tools)',
    description:
      "The URL's page (the dashboard's, no sign-in) shows the step's plan and takes one response as token_id, " +
      "as the API would (the step's approval policy applies); good once, until expires_in (1m–7d); a used or expired " +
      "link's page answers 410. Only a hash of the link's secret is kept: the URL is shown once.",
    before: ({ ctx, orgId, params }) => void getWorkflowView(ctx, orgId, params.workflow_id),
    body: { schema: approvalLinkInSchema },
    responses: { 201: { description: 'the link', schema: approvalLinkSchema } },
    errors: [400, 404, 409],
    handle: ({ ctx, orgId, params, body }) => reply.created(createApprovalLink(ctx, orgId, params.workflow_id, params.step_id, body)),
  }),
];
