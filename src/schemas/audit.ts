// The org's audit log (CONTRACT 2 "Scopes and actors"). In: the list's query. Out: an entry, a page of them.
import { z } from 'zod';
import { apiSchemas, described, pagedQuery, pageOf } from './common.ts';

export const auditListQuerySchema = pagedQuery('changes made at or after', 'changes made before', {
  actor: z.string().min(1).max(64).describe('a token id: the changes made with that token').optional(),
  action: z.string().min(1).max(100).describe('the operation, e.g. webhooks.create, rollbacks.create, steps.approve').optional(),
  resource_id: z.string().min(1).max(200).describe('the id of what was created or changed').optional(),
});

export const auditEntrySchema = z
  .object({
    id: z.string(),
    at: described(z.string(), 'when the change was made (ISO 8601)'),
    actor: z
      .object({ token_id: z.string().nullable(), token_name: z.string().nullable() })
      .describe('the API token that made it (token_id null and token_name "local": a database command)'),
    action: described(z.string(), 'the operation: webhooks.create, rollbacks.create, steps.approve, configs.veto, tokens.revoke, …'),
    resource_type: z.string().nullable(),
    resource_id: described(z.string().nullable(), 'the id of what it created or changed'),
    status: described(z.number().int().nullable(), 'the HTTP status answered (a refused write is kept too); null for a database command'),
  })
  .register(apiSchemas, { id: 'AuditEntry' });

export const auditPageSchema = pageOf(auditEntrySchema, 'AuditPage');
