// An approval step under a policy (CONTRACT 10.4), as pure functions of the policy, the responses
// recorded so far and the engine's clock: whether a token may answer (self-approval, rules that
// admit it, a repeated answer), how each rule stands ("k of n": its distinct approvers), whether
// the policy has decided (approved once every rule has `required` approvers, rejected by `any` or
// `majority`), when the step expires, and whether the plan approves itself (`auto_approve`). No I/O:
// the engine (src/engine/steps/approval.ts) looks the tokens up, keeps the responses on the step,
// emits the events and wakes the step at its expiry.
import { z } from 'zod';
import type { ApprovalPolicy, ApprovalRule, RespondedBy } from '../src/domain/approval-policy.ts';

/** A token as a rule looks at it. */
export interface Approver {
  token_id: string;
  token_name: string | null;
  scope: string;
}

/** One response as the step keeps it (every response the policy admitted, in order). */
export const policyResponseSchema = z.object({
  token_id: z.string(),
  token_name: z.string().nullable(),
  scope: z.string(),
  response: z.enum(['approved', 'rejected']),
  at: z.string(),
  note: z.string().optional(),
  /** `via link` when given through a one-time approval link */
  via: z.string().optional(),
});
export type PolicyResponse = z.infer<typeof policyResponseSchema>;

/** One approval (or rejection) as the step's view shows it. */
export interface ResponseView {
  responded_by: RespondedBy;
  at: string;
  note?: string;
}

export interface RuleView {
  name: string;
  required: number;
  approvals: ResponseView[];
}

export interface PolicyDecision {
  status: 'requested' | 'approved' | 'rejected';
  /** the rule that decided (the one met last, or the one a rejection lost); null while undecided */
  decided_by_rule: string | null;
  rules: RuleView[];
  rejections: ResponseView[];
}

/** Whether a rule admits a token: named by id or by name, or of a scope the rule lists. */
export function admits(rule: ApprovalRule, a: Pick<Approver, 'token_id' | 'token_name' | 'scope'>): boolean {
  const { token_ids = [], token_names = [], scopes = [] } = rule.approvers;
  return (
    token_ids.includes(a.token_id) ||
    (a.token_name !== null && token_names.includes(a.token_name)) ||
    (scopes as readonly string[]).includes(a.scope)
  );
}

export type Judgement =
  | { kind: 'recorded'; responses: PolicyResponse[] }
  | { kind: 'repeated' }
  | { kind: 'changed'; previous: 'approved' | 'rejected' }
  | { kind: 'self_approval' }
  | { kind: 'not_an_approver'; rules: string[] };

/**
 * A token's response to a step under `policy`: refused when it started the run (while
 * prevent_self_approval) or no rule admits it; a repeat of its earlier answer changes nothing; a
 * different answer from the same token is refused too (its first answer stands).
 */
export function judgeResponse(
  policy: ApprovalPolicy,
  responses: readonly PolicyResponse[],
  who: Approver,
  starterTokenId: string | null,
  answer: { response: 'approved' | 'rejected'; at: string; note?: string; via?: string },
): Judgement {
  if (policy.prevent_self_approval && starterTokenId !== null && who.token_id === starterTokenId) return { kind: 'self_approval' };
  if (!policy.rules.some((r) => admits(r, who))) return { kind: 'not_an_approver', rules: policy.rules.map((r) => r.name) };
  const earlier = responses.find((r) => r.token_id === who.token_id);
  if (earlier) return earlier.response === answer.response ? { kind: 'repeated' } : { kind: 'changed', previous: earlier.response };
  const r: PolicyResponse = {
    token_id: who.token_id,
    token_name: who.token_name,
    scope: who.scope,
    response: answer.response,
    at: answer.at,
    ...(answer.note !== undefined ? { note: answer.note } : {}),
    ...(answer.via ? { via: answer.via } : {}),
  };
  return { kind: 'recorded', responses: [...responses, r] };
}

const viewOf = (r: PolicyResponse): ResponseView => ({
  responded_by: { token_id: r.token_id, token_name: r.token_name },
  at: r.at,
  ...(r.note !== undefined ? { note: r.note } : {}),
});

/**
 * Where the step stands under `policy` (the policy of now: a changed policy applies to steps still
 * waiting): each rule's distinct approvers, the eligible rejections, and the decision.
 * `pools[i]`: how many tokens rule i could ever count now (for `majority`; a rule is lost when
 * fewer than `required` of them are left once its rejecters are taken away).
 */
export function decide(
  policy: ApprovalPolicy,
  responses: readonly PolicyResponse[],
  starterTokenId: string | null,
  pools: readonly number[] = [],
): PolicyDecision {
  const counted = responses.filter((r) => !(policy.prevent_self_approval && r.token_id === starterTokenId));
  const approvals = counted.filter((r) => r.response === 'approved');
  const rejects = counted.filter((r) => r.response === 'rejected' && policy.rules.some((rule) => admits(rule, r)));
  const rules = policy.rules.map((rule) => ({ rule, approvals: approvals.filter((r) => admits(rule, r)) }));
  const view = { rules: rules.map((x) => ({ name: x.rule.name, required: x.rule.required, approvals: x.approvals.map(viewOf) })) };
  const rejections = rejects.map(viewOf);
  // rejected: with `any`, the first eligible rejection (its first rule); with `majority`, a rule that can no longer be met
  if (policy.reject === 'any' && rejects.length) {
    const rule = policy.rules.find((x) => admits(x, rejects[0]))!;
    return { status: 'rejected', decided_by_rule: rule.name, ...view, rejections };
  }
  if (policy.reject === 'majority') {
    const lost = policy.rules.find((rule, i) => {
      const against = rejects.filter((r) => admits(rule, r)).length;
      const pool = Math.max(pools[i] ?? 0, against);
      return against > 0 && pool - against < rule.required;
    });
    if (lost) return { status: 'rejected', decided_by_rule: lost.name, ...view, rejections };
  }
  if (rules.every((x) => x.approvals.length >= x.rule.required)) {
    // the rule met last: its required-th approval came latest (the later rule when one response met two)
    const metAt = (x: (typeof rules)[number]) => counted.indexOf(x.approvals[x.rule.required - 1]);
    let last = rules[0];
    for (const x of rules) if (metAt(x) >= metAt(last)) last = x;
    return { status: 'approved', decided_by_rule: last.rule.name, ...view, rejections };
  }
  return { status: 'requested', decided_by_rule: null, ...view, rejections };
}

/** When a step requested at `requestedAtMs` expires under `policy` (ms, engine clock), or null. */
export function expiresAtMs(policy: ApprovalPolicy, requestedAtMs: number): number | null {
  return policy.expires_after_ms === null ? null : requestedAtMs + policy.expires_after_ms;
}

/** What auto_approve reads of a plan: each install's diff (src/domain/config-diff.ts). */
const planSchema = z.object({
  installs: z.array(
    z.object({
      install_id: z.string(),
      install_name: z.string().optional(),
      diff: z.object({
        changed: z.boolean(),
        components: z.object({
          removed: z.array(z.object({ name: z.string() })),
          changed: z.array(z.object({ name: z.string(), changes: z.array(z.object({ path: z.string(), op: z.string() })) })),
        }),
        sandbox_changed: z.boolean(),
      }),
    }),
  ),
});

/**
 * Whether `policy` approves a plan by itself: `no_changes` when every install's diff is unchanged;
 * `no_destructive` when no install removes a component or replaces one (its `type` changes) or its
 * sandbox. `reason` says why either way (recorded as `responded_by: {type: "policy", reason}`).
 */
export function autoApproval(policy: ApprovalPolicy, plan: unknown): { approve: boolean; reason: string } | null {
  if (!policy.auto_approve) return null;
  const p = planSchema.safeParse(plan);
  if (!p.success) return { approve: false, reason: `${policy.auto_approve}: the plan could not be read` };
  const installs = p.data.installs;
  const name = (i: (typeof installs)[number]) => i.install_name ?? i.install_id;
  if (policy.auto_approve === 'no_changes') {
    const changed = installs.find((i) => i.diff.changed);
    return changed
      ? { approve: false, reason: `no_changes: install ${name(changed)} changes` }
      : { approve: true, reason: `no_changes: the ${installs.length} installs' diffs are all unchanged` };
  }
  for (const i of installs) {
    const removed = i.diff.components.removed[0];
    if (removed) return { approve: false, reason: `no_destructive: install ${name(i)} removes component ${removed.name}` };
    const replaced = i.diff.components.changed.find((c) => c.changes.some((x) => x.path === 'type'));
    if (replaced)
      return { approve: false, reason: `no_destructive: install ${name(i)} replaces component ${replaced.name} (its type changes)` };
    if (i.diff.sandbox_changed) return { approve: false, reason: `no_destructive: install ${name(i)} replaces its sandbox` };
  }
  return { approve: true, reason: `no_destructive: no component removed or replaced in the ${installs.length} installs` };
}
