// Approval policies (CONTRACT 10.4): who must approve an approval step of an app's runs, how many of
// them, for how long the step waits, and when the plan approves itself. The vocabulary shared by the
// schema (src/schemas/approval-policies.ts), the pure evaluation (machines/approval-policy.ts), the
// engine (src/engine/steps/approval.ts) and the views.
import { z } from 'zod';
import { SCOPES } from './scopes.ts';

export const REJECT_MODES = ['any', 'majority'] as const;
export const AUTO_APPROVE = ['no_changes', 'no_destructive'] as const;
export type AutoApprove = (typeof AUTO_APPROVE)[number];

/** Bounds of CONTRACT 10.4. */
export const POLICY_BOUNDS = {
  required: { min: 1, max: 10 },
  rules: { min: 1, max: 10 },
  expiresAfterMs: { min: 60_000, max: 30 * 86_400_000 },
  linkExpiresInMs: { min: 60_000, max: 7 * 86_400_000 },
} as const;

export const approvalRuleSchema = z.object({
  name: z.string(),
  required: z.number().int(),
  approvers: z.object({
    token_ids: z.array(z.string()).optional(),
    token_names: z.array(z.string()).optional(),
    scopes: z.array(z.enum(SCOPES)).optional(),
  }),
});
export type ApprovalRule = z.infer<typeof approvalRuleSchema>;

/** A policy as stored (defaults filled in; `expires_after` as given, its milliseconds beside it). */
export const approvalPolicySchema = z.object({
  rules: z.array(approvalRuleSchema),
  prevent_self_approval: z.boolean(),
  expires_after: z.string().nullable(),
  expires_after_ms: z.number().nullable(),
  reject: z.enum(REJECT_MODES),
  auto_approve: z.enum(AUTO_APPROVE).nullable(),
});
export type ApprovalPolicy = z.infer<typeof approvalPolicySchema>;

/** Who answered a step: a token (CONTRACT 2), or the policy itself (auto_approve). */
export type RespondedBy = { token_id: string | null; token_name: string | null } | { type: 'policy'; reason: string };

/**
 * The policy that governs a run's approval steps: the app's, made stricter by the run's own when it
 * names one (every rule of both must pass; self-approval is prevented when either says so; the
 * earlier expiry; `any` over `majority`; auto-approval only when both allow it, the stricter kind).
 */
export function effectivePolicy(app: ApprovalPolicy | null, run: ApprovalPolicy | null): ApprovalPolicy | null {
  if (!app || !run) return app ?? run;
  const names = new Set(app.rules.map((r) => r.name));
  const expiries = [app, run].filter((p) => p.expires_after_ms !== null);
  const soonest = expiries.sort((a, b) => a.expires_after_ms! - b.expires_after_ms!)[0];
  const auto = app.auto_approve && run.auto_approve ? (app.auto_approve === 'no_changes' ? app : run).auto_approve : null;
  return {
    rules: [...app.rules, ...run.rules.map((r) => (names.has(r.name) ? { ...r, name: `${r.name} (run)` } : r))],
    prevent_self_approval: app.prevent_self_approval || run.prevent_self_approval,
    expires_after: soonest?.expires_after ?? null,
    expires_after_ms: soonest?.expires_after_ms ?? null,
    reject: app.reject === 'any' || run.reject === 'any' ? 'any' : 'majority',
    auto_approve: auto,
  };
}

/** What a policy's view shows of it (the policy as the API answers it, without the milliseconds). */
export function policyView(p: ApprovalPolicy) {
  return {
    rules: p.rules,
    prevent_self_approval: p.prevent_self_approval,
    expires_after: p.expires_after,
    reject: p.reject,
    auto_approve: p.auto_approve,
  };
}
