// CONTRACT 10.4: an app's approval policy.
import * as policies from '../../services/approval-policies.ts';
import { mustGetApp } from '../../services/catalog.ts';
import { defineRoute, deleteRoute, readRoute, reply } from '../api-route.ts';
import { approvalPolicyInSchema, approvalPolicySchema } from '../../schemas/approval-policies.ts';

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
];
