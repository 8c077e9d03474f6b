// CONTRACT 2 "Scopes and actors": the org's audit log (admin only).
import * as svc from '../../services/audit.ts';
import { readRoute } from '../api-route.ts';
import { auditListQuerySchema, auditPageSchema } from '../../schemas/audit.ts';

export const auditRoutes = [
  readRoute(
    {
      operationId: 'listAudit',
      path: '/v1/audit',
      tag: 'audit',
      scope: 'admin',
      summary: "The org's audit log, oldest first: every write through the API or the dashboard, with its actor",
      description:
        'Every change made through /v1 or the dashboard, refused writes (4xx) too, and the database ' +
        "commands' changes (actor `local`, no status). Never a request body or a secret. Kept for " +
        '--audit-retention (default 90 days).',
      query: auditListQuerySchema,
      ok: ['a page of the audit log', auditPageSchema],
      errors: [400],
    },
    ({ ctx, orgId, query }) => svc.listAudit(ctx, orgId, query),
  ),
];
