// Token scopes and actors (CONTRACT 2 "Scopes and actors"): what a token may do, and who made a change.
import { z } from 'zod';

/**
 * `read`: every GET but the audit log; `webhooks`: read, plus the webhooks' writes; `deploy`: read,
 * plus apps, configs, branches, installs, runs, rollbacks, approvals, cancel, veto, change windows;
 * `admin`: everything (tokens and the audit log included). Tokens made before scopes are `admin`.
 */
export const SCOPES = ['read', 'webhooks', 'deploy', 'admin'] as const;
export type Scope = (typeof SCOPES)[number];
export const scopeSchema = z.enum(SCOPES);
export const DEFAULT_SCOPE: Scope = 'admin';

export const isScope = (s: unknown): s is Scope => typeof s === 'string' && (SCOPES as readonly string[]).includes(s);

/** Whether a token of scope `have` may run an operation that needs `need` (webhooks and deploy are side by side, admin above both). */
export function allows(have: Scope, need: Scope): boolean {
  return need === 'read' || have === need || have === 'admin';
}

/** Who made a change: the API token (its name as it was then), or `local` for the database commands. */
export interface Actor {
  token_id: string | null;
  token_name: string | null;
}

/** The actor of `svc orgs create` and `svc tokens create` (CONTRACT 2). */
export const LOCAL_ACTOR: Actor = { token_id: null, token_name: 'local' };

/** One line of the audit log, as the engine writes it. */
export interface AuditEntry {
  org_id: string;
  actor: Actor;
  /** the operation: `webhooks.create`, `rollbacks.create`, `steps.approve`, `tokens.revoke`, … */
  action: string;
  resource_type: string | null;
  resource_id: string | null;
  /** the HTTP status answered; null for the database commands */
  status: number | null;
}
