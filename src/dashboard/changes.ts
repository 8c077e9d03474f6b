// A change made from the dashboard (CONTRACT 2 "Scopes and actors"): the session's scope checked
// (403, naming the scope needed), then the change and its audit row in one engine transaction
// (src/engine/engine.ts change), the actor the token the session signed in with. A refused change
// is kept too, with the status the API would have answered. The operations are the API's own
// (their scope, action and resource come from the route table), plus the token page's.
import type { AppContext } from '../context.ts';
import { ForbiddenError } from '../domain/errors.ts';
import { allows, type Scope } from '../domain/scopes.ts';
import { API_ROUTES } from '../http/routes/index.ts';
import { toHttpError } from '../http/http-error.ts';
import { keepRefused } from '../http/api-route.ts';
import type { DashContext } from './session.ts';

export interface DashOp {
  scope: Scope;
  action: string;
  resource: string;
}

/** The scope, action and resource of an API operation, by its operationId. */
export function apiOp(operationId: string, action?: string): DashOp {
  const r = API_ROUTES.find((x) => x.operationId === operationId);
  if (!r?.audit || r.scope === 'public') throw new Error(`no write operation ${operationId}`);
  return { scope: r.scope, action: action ?? r.audit.action, resource: r.audit.resource };
}

export const TOKENS_CREATE: DashOp = { scope: 'admin', action: 'tokens.create', resource: 'token' };
export const TOKENS_REVOKE: DashOp = { scope: 'admin', action: 'tokens.revoke', resource: 'token' };

/** Whether the signed-in session may do what `op` needs (pages hide what it cannot do). */
export const may = (c: DashContext, scope: Scope): boolean => {
  const s = c.get('session');
  return !!s && allows(s.scope, scope);
};

/** Keep a write the dashboard refused before making it (its form did not validate: 400, as the API answers). */
export function refused(c: DashContext, ctx: AppContext, op: DashOp, status: number, id: string | null = null): void {
  const s = c.get('session');
  if (!s) return;
  // as the API: the scope first (a session that may not make this write hears 403, not 400)
  if (!allows(s.scope, op.scope)) change(c, ctx, op, { id }, () => undefined);
  keepRefused(ctx, () => ({ org_id: s.org_id, actor: s.actor, action: op.action, resource_type: op.resource, resource_id: id, status }));
}

/**
 * Run `fn` as a change of the signed-in session: `status` is what the API answers for it (201 for
 * a create), `id` the resource it changed (or a function of `fn`'s result: what it created).
 */
export function change<T>(
  c: DashContext,
  ctx: AppContext,
  op: DashOp,
  target: { id?: string | null; idOf?: (r: T) => string | null; status?: number },
  fn: () => T,
): T {
  const s = c.get('session');
  if (!s) throw new Error('a dashboard change without a session');
  const entry = (status: number, id: string | null) => ({
    org_id: s.org_id,
    actor: s.actor,
    action: op.action,
    resource_type: op.resource,
    resource_id: id,
    status,
  });
  try {
    if (!allows(s.scope, op.scope)) {
      throw new ForbiddenError(
        op.scope,
        `${op.action} needs a token with scope ${op.scope}${op.scope === 'admin' ? '' : ' (or admin)'}; ` +
          `this session's token has scope ${s.scope}`,
      );
    }
    return ctx.engine.change((t) => {
      const r = fn();
      t.audit(entry(target.status ?? 200, target.idOf ? target.idOf(r) : (target.id ?? null)));
      return r;
    });
  } catch (err) {
    keepRefused(ctx, () => entry(toHttpError(err).status, target.id ?? null));
    throw err;
  }
}
