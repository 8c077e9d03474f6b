// The pure evaluation of an approval policy (machines/approval-policy.ts) and the merge of an app's
// policy with a run's stricter one (src/domain/approval-policy.ts): no store, no clock.
import { describe, expect, it } from 'vitest';
import { autoApproval, decide, judgeResponse, type PolicyResponse } from '../../machines/approval-policy.ts';
import { effectivePolicy } from '../../src/domain/approval-policy.ts';
import { approvalPolicyInSchema } from '../../src/schemas/approval-policies.ts';
import { diffConfigs } from '../../src/domain/config-diff.ts';
import type { AppConfigBody } from '../../src/domain/app-config.ts';

const policy = (p: unknown) => approvalPolicyInSchema.parse(p);
const TWO_IN = {
  rules: [
    { name: 'sre', required: 2, approvers: { token_names: ['a', 'b', 'c'] } },
    { name: 'admin', required: 1, approvers: { scopes: ['admin'] } },
  ],
};
const TWO = policy(TWO_IN);
const r = (name: string, scope: string, response: 'approved' | 'rejected' = 'approved'): PolicyResponse => ({
  token_id: `tok_${name}`,
  token_name: name,
  scope,
  response,
  at: '2026-01-01T00:00:00.000Z',
});

describe('approval policy evaluation', () => {
  it('approves once every rule has its distinct approvers, naming the rule met last; one token may count for two rules', () => {
    expect(decide(TWO, [r('a', 'deploy'), r('boss', 'admin')], null).status).toBe('requested');
    expect(decide(TWO, [r('a', 'deploy'), r('boss', 'admin'), r('b', 'deploy')], null)).toMatchObject({
      status: 'approved',
      decided_by_rule: 'sre',
    });
    expect(decide(TWO, [r('a', 'deploy'), r('b', 'deploy'), r('boss', 'admin')], null).decided_by_rule).toBe('admin');
    // an admin token named c counts for both rules
    expect(decide(TWO, [r('a', 'deploy'), r('c', 'admin')], null)).toMatchObject({ status: 'approved', decided_by_rule: 'admin' });
  });

  it('judges: self-approval, no rule, a repeat, a changed mind', () => {
    const at = { response: 'approved' as const, at: 'x' };
    expect(judgeResponse(TWO, [], { token_id: 'tok_a', token_name: 'a', scope: 'deploy' }, 'tok_a', at).kind).toBe('self_approval');
    expect(
      judgeResponse({ ...TWO, prevent_self_approval: false }, [], { token_id: 'tok_a', token_name: 'a', scope: 'deploy' }, 'tok_a', at)
        .kind,
    ).toBe('recorded');
    expect(judgeResponse(TWO, [], { token_id: 'tok_z', token_name: 'z', scope: 'deploy' }, null, at)).toEqual({
      kind: 'not_an_approver',
      rules: ['sre', 'admin'],
    });
    expect(judgeResponse(TWO, [r('a', 'deploy')], { token_id: 'tok_a', token_name: 'a', scope: 'deploy' }, null, at).kind).toBe('repeated');
    expect(
      judgeResponse(TWO, [r('a', 'deploy')], { token_id: 'tok_a', token_name: 'a', scope: 'deploy' }, null, {
        ...at,
        response: 'rejected',
      }),
    ).toEqual({
      kind: 'changed',
      previous: 'approved',
    });
  });

  it('reject majority: rejected only once a rule cannot be met with the tokens left', () => {
    const maj = { ...TWO, reject: 'majority' as const };
    // 3 sre tokens exist: one rejection leaves 2 ≥ 2
    expect(decide(maj, [r('a', 'deploy', 'rejected')], null, [3, 1]).status).toBe('requested');
    expect(decide(maj, [r('a', 'deploy', 'rejected'), r('b', 'deploy', 'rejected')], null, [3, 1])).toMatchObject({
      status: 'rejected',
      decided_by_rule: 'sre',
    });
    expect(decide(TWO, [r('a', 'deploy', 'rejected')], null)).toMatchObject({ status: 'rejected', decided_by_rule: 'sre' });
  });

  it('auto_approve: no_changes wants every diff unchanged; no_destructive refuses a removed component, a type change, a sandbox change', () => {
    const base: AppConfigBody = {
      sandbox: { size: 's' },
      components: [{ name: 'api', type: 'helm', values: { image: 'api:1' } }, { name: 'db' }],
    };
    const plan = (to: AppConfigBody) => ({
      installs: [{ install_id: 'inst_1', install_name: 'eu-1', diff: diffConfigs(base, to) }],
    });
    const nc = policy({ ...TWO_IN, auto_approve: 'no_changes' });
    const nd = policy({ ...TWO_IN, auto_approve: 'no_destructive' });
    expect(autoApproval(nc, plan(base))?.approve).toBe(true);
    expect(autoApproval(TWO, plan(base))).toBeNull();
    const update = { ...base, components: [{ ...base.components[0], values: { image: 'api:2' } }, { name: 'db' }] };
    expect(autoApproval(nc, plan(update))?.approve).toBe(false);
    expect(autoApproval(nd, plan(update))).toMatchObject({ approve: true, reason: expect.stringMatching(/^no_destructive/) });
    expect(autoApproval(nd, plan({ ...base, components: [base.components[0]] }))).toMatchObject({
      approve: false,
      reason: 'no_destructive: install eu-1 removes component db',
    });
    expect(autoApproval(nd, plan({ ...base, components: [{ ...base.components[0], type: 'kustomize' }, { name: 'db' }] }))?.approve).toBe(
      false,
    );
    expect(autoApproval(nd, plan({ ...base, sandbox: { size: 'l' } }))?.approve).toBe(false);
  });

  it("a run's policy only adds to the app's: every rule of both, the earlier expiry, any over majority, auto-approval only when both allow", () => {
    const app = policy({
      ...TWO_IN,
      expires_after: '1d',
      reject: 'majority',
      auto_approve: 'no_destructive',
      prevent_self_approval: false,
    });
    const run = policy({ rules: [{ name: 'sre', required: 1, approvers: { scopes: ['deploy'] } }], expires_after: '2h' });
    const p = effectivePolicy(app, run)!;
    expect(p.rules.map((x) => x.name)).toEqual(['sre', 'admin', 'sre (run)']);
    expect(p).toMatchObject({ expires_after: '2h', reject: 'any', auto_approve: null, prevent_self_approval: true });
    expect(effectivePolicy(null, run)).toBe(run);
    expect(effectivePolicy(null, null)).toBeNull();
  });
});
