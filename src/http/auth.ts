import type { MiddlewareHandler } from 'hono';
import type { AppContext } from '../context.ts';
import { orgOfToken } from '../services/api-tokens.ts';
import { forbidden, unauthorized } from './http-error.ts';

export type AuthEnv = { Variables: { orgId: string } };

/** CONTRACT 2: Bearer token (401 if missing/unknown) for the org in X-Svc-Org-ID (403 otherwise). */
export function requireOrg(ctx: AppContext): MiddlewareHandler<AuthEnv> {
  return async (c, next) => {
    const header = c.req.header('authorization') ?? '';
    const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
    if (!m) throw unauthorized();
    const tokenOrg = orgOfToken(ctx, m[1]);
    if (!tokenOrg) throw unauthorized();
    const orgId = c.req.header('x-svc-org-id');
    if (!orgId) throw forbidden('X-Svc-Org-ID header is required');
    if (orgId !== tokenOrg) throw forbidden('the API token is not valid for this org');
    c.set('orgId', orgId);
    await next();
  };
}
