// Approval policies (CONTRACT 10.4). In: an app's policy (PUT …/approval-policy, or `approval_policy`
// in a branch run's or a fleet rollback's body), a one-time approval link. Out: the policy, a link,
// an approval step's view ("k of n" per rule). What needs the store (token_ids naming tokens of the
// org) is checked by the service (src/services/approval-policies.ts).
import { z } from 'zod';
import { approvalRuleSchema, AUTO_APPROVE, POLICY_BOUNDS, REJECT_MODES, type ApprovalPolicy } from '../domain/approval-policy.ts';
import { durationMs } from '../domain/duration.ts';
import { SCOPES } from '../domain/scopes.ts';
import { apiSchemas, described, timestamp } from './common.ts';

// ------------------------------------------------------------------ In

/** Only these scopes may answer an approval (the response is a `deploy` operation). */
const ANSWERING_SCOPES: readonly string[] = ['deploy', 'admin'];

const ruleInSchema = z.strictObject({
  name: z.string().trim().min(1).max(100),
  required: z.number().int().min(POLICY_BOUNDS.required.min).max(POLICY_BOUNDS.required.max),
  approvers: z.strictObject({
    token_ids: z.array(z.string().min(1).max(64)).max(100).optional(),
    token_names: z.array(z.string().min(1).max(200)).max(100).optional(),
    scopes: z.array(z.enum(SCOPES)).max(4).optional(),
  }),
});

const between = (ms: { min: number; max: number }, text: string) =>
  z.string().refine((d) => {
    const v = durationMs(d);
    return v !== null && v >= ms.min && v <= ms.max;
  }, `a duration ${text} (e.g. 30m, 24h or 7d)`);

export const approvalPolicyInSchema = z
  .strictObject({
    rules: z.array(ruleInSchema).min(POLICY_BOUNDS.rules.min).max(POLICY_BOUNDS.rules.max),
    prevent_self_approval: z.boolean().optional(),
    expires_after: between(POLICY_BOUNDS.expiresAfterMs, 'from 1m to 30d').optional(),
    reject: z.enum(REJECT_MODES).optional(),
    auto_approve: z.enum(AUTO_APPROVE).optional(),
  })
  .superRefine((p, ctx) => {
    const seen = new Set<string>();
    p.rules.forEach((r, i) => {
      const at = (...path: (string | number)[]) => ['rules', i, ...path];
      if (seen.has(r.name)) ctx.addIssue({ code: 'custom', path: at('name'), message: `rule ${r.name}: another rule has this name` });
      seen.add(r.name);
      const { token_ids = [], token_names = [], scopes = [] } = r.approvers;
      if (!token_ids.length && !token_names.length && !scopes.length) {
        ctx.addIssue({
          code: 'custom',
          path: at('approvers'),
          message: `rule ${r.name}: approvers names no token_ids, token_names or scopes`,
        });
        return;
      }
      if (!token_ids.length && !token_names.length && !scopes.some((s) => ANSWERING_SCOPES.includes(s))) {
        ctx.addIssue({
          code: 'custom',
          path: at('approvers', 'scopes'),
          message: `rule ${r.name}: no token can ever satisfy it (only deploy and admin tokens may answer an approval)`,
        });
      }
      if (!token_names.length && !scopes.length && new Set(token_ids).size < r.required) {
        ctx.addIssue({
          code: 'custom',
          path: at('required'),
          message: `rule ${r.name}: required ${r.required} but its approvers name only ${new Set(token_ids).size} tokens`,
        });
      }
    });
  })
  .transform(
    (p): ApprovalPolicy => ({
      rules: p.rules.map((r) => ({
        name: r.name,
        required: r.required,
        approvers: Object.fromEntries(Object.entries(r.approvers).filter(([, v]) => v?.length)) as ApprovalPolicy['rules'][0]['approvers'],
      })),
      prevent_self_approval: p.prevent_self_approval ?? true,
      expires_after: p.expires_after ?? null,
      expires_after_ms: p.expires_after === undefined ? null : durationMs(p.expires_after)!,
      reject: p.reject ?? 'any',
      auto_approve: p.auto_approve ?? null,
    }),
  );

/** POST …/approval-links: the token the link answers as, and how long it is good for. */
export const approvalLinkInSchema = z.strictObject({
  token_id: z.string().min(1).max(64),
  expires_in: between(POLICY_BOUNDS.linkExpiresInMs, 'from 1m to 7d'),
});

// ------------------------------------------------------------------ Out

export const approvalPolicySchema = z
  .object({
    rules: z.array(approvalRuleSchema),
    prevent_self_approval: z.boolean(),
    expires_after: z.string().nullable(),
    reject: z.enum(REJECT_MODES),
    auto_approve: z.enum(AUTO_APPROVE).nullable(),
  })
  .register(apiSchemas, { id: 'ApprovalPolicy' });

/** Who answered: a token, or the policy itself (auto_approve). */
export const respondedBySchema = z.union([
  z.object({ token_id: z.string().nullable(), token_name: z.string().nullable() }),
  z.object({ type: z.literal('policy'), reason: z.string() }),
]);

const responseViewSchema = z.object({ responded_by: respondedBySchema, at: timestamp, note: z.string().optional() });

/** An approval step's rules under its policy: each "k of n" with who and when. */
export const approvalRuleViewSchema = z.object({ name: z.string(), required: z.number().int(), approvals: z.array(responseViewSchema) });

export const approvalPolicyViewShape = {
  rules: described(
    z.array(approvalRuleViewSchema),
    'under an approval policy: each rule, its required count and who approved when',
  ).optional(),
  rejections: z.array(responseViewSchema).optional(),
  expires_at: described(timestamp.nullable(), 'under a policy with expires_after: when the step fails approval_expired').optional(),
  decided_by_rule: described(z.string(), 'under a policy: the rule that decided (for an approval, the rule met last)').optional(),
  auto_approve_declined: described(
    z.string(),
    'under a policy with auto_approve: why it did not approve the plan (it waits for people)',
  ).optional(),
};

export const approvalLinkSchema = z
  .object({ url: described(z.string(), 'the one-time page: shows the plan and takes one response as the token'), expires_at: timestamp })
  .register(apiSchemas, { id: 'ApprovalLink' });
