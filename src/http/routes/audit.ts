// CONTRACT 2 "Scopes and actors": the org's audit log (admin only).
import * as svc from '../../services/audit.ts';
import { defineRoute, reply } from '../api-route.ts';
import { auditListQuerySchema, auditPageSchema } from '../../schemas/audit.ts';

export const auditRoutes = [
  defineRoute({
    operationId: 'listAudit',
    method: 'get',
    path: '/v1/audit',
    tag: 'audit',
    scope: 'admin',
    summary: "The org's audit log, oldest first: every write through the API or the dashboard, with its actor",
    description:
      "Every change made through /v1 or the dashboard, refused writes (4xx) too, and the database commands' changes (actor `local`, no status). Never a request body or a secret. Kept for --audit-retention (default 90 days).",
    query: auditListQuerySchema,
    responses: { 200: { description: 'a page of the audit log', schema: auditPageSchema } },
    errors: [400],
    handle: ({ ctx, orgId, query }) => reply.ok(svc.listAudit(ctx, orgId, query)),
  }),
];
