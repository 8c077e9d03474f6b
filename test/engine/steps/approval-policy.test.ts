// Approval steps under an approval policy (CONTRACT 10.4), on a ManualClock: N-of-M rules decide
// exactly when every rule is met (events response_recorded per counted response, then approved
// naming the rule met last), a duplicate counts once, an ineligible token and the run's starter are
// refused, an expiry fails the step approval_expired and cancels the later groups, auto_approve
// decides from the plan, and a policy change applies to the steps still waiting.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { StepDef } from '../../../src/engine/definitions.ts';
import { approvalPolicyInSchema } from '../../../src/schemas/approval-policies.ts';
import { putAppApprovalPolicy } from '../../../store/approval-policies.ts';
import { createToken } from '../../../store/orgs.ts';
import { ApprovalRefusedError } from '../../../src/domain/errors.ts';
import type { Actor } from '../../../src/domain/scopes.ts';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CONFIG, CONFIG_V2, EngineWorld } from '../../helpers/engine.ts';
import { getWorkflow, listSteps } from '../../../store/workflows.ts';
import { StepWorld } from './step-world.ts';

const plan = (group: string, installIds: string[] = []): StepDef => ({
  name: `plan ${group}`,
  target_type: null,
  execution_type: 'approval',
  kind: 'approval',
  params: { group, install_ids: installIds },
});

const TWO_RULES = {
  rules: [
    { name: 'sre', required: 2, approvers: { token_names: ['sre-a', 'sre-b', 'sre-c'] } },
    { name: 'admin', required: 1, approvers: { scopes: ['admin'] } },
  ],
};

type Tok = Actor & { token_id: string };

describe('approval step under a policy', () => {
  let s: StepWorld;
  let tok: Record<'sreA' | 'sreB' | 'admin' | 'other', Tok>;
  beforeEach(() => {
    s = new StepWorld();
    const mk = (name: string, scope: 'deploy' | 'admin'): Tok => ({
      token_id: createToken(s.db, s.org, name, scope).token_id,
      token_name: name,
    });
    tok = { sreA: mk('sre-a', 'deploy'), sreB: mk('sre-b', 'deploy'), admin: mk('boss', 'admin'), other: mk('intern', 'deploy') };
  });
  afterEach(() => s.close());

  const setPolicy = (p: unknown) =>
    putAppApprovalPolicy(s.db, s.org, s.config.app_id, approvalPolicyInSchema.parse(p), new Date().toISOString());
  const answer = (runId: string, stepName: string, who: Tok, response: 'approved' | 'rejected' = 'approved') => {
    const run = s.wf(runId);
    const step = s.step(run, stepName);
    return s.tx((t) => s.runs.steps.approval.respondToApproval(t, s.org, runId, step.step_id, response, undefined, who));
  };
  const approvalEvents = (stepId: string) =>
    s.w
      .events()
      .filter((e) => e.type === 'com.svc.workflow_step.approval.v1' && (e.data as { step: { id: string } }).step.id === stepId)
      .map((e) => e.data as { approval: Record<string, unknown> } & Record<string, unknown>);

  // every order of the three counted responses, with a duplicate (right after the first sre) and an ineligible token between
  type Who = 'sreA' | 'sreB' | 'admin' | 'dup' | 'other';
  const perms = (xs: Who[]): Who[][] =>
    xs.length <= 1 ? [xs] : xs.flatMap((x, i) => perms([...xs.slice(0, i), ...xs.slice(i + 1)]).map((p) => [x, ...p]));
  const orders: Who[][] = perms(['sreA', 'sreB', 'admin']).map((p) => {
    const withDup = [...p];
    withDup.splice(withDup.findIndex((w) => w !== 'admin') + 1, 0, 'dup');
    withDup.splice(1, 0, 'other');
    return withDup;
  });
  for (const order of orders) {
    it(`two rules (2 of sre, 1 admin) across 3 groups: proceeds exactly when both are met (order ${order.join(', ')})`, () => {
      setPolicy(TWO_RULES);
      const run = s.run([plan('g1'), plan('g2'), plan('g3')]);
      const g1 = s.step(run, 'plan g1');
      expect(g1.approval).toMatchObject({
        status: 'requested',
        rules: [
          { name: 'sre', required: 2, approvals: [] },
          { name: 'admin', required: 1, approvals: [] },
        ],
        rejections: [],
        expires_at: null,
      });
      const counted: string[] = [];
      let firstSre: Tok | null = null;
      for (const who of order) {
        expect(s.step(run, 'plan g1').status).toBe('awaiting_approval');
        if (who === 'other') {
          const err = (() => {
            try {
              answer(run.workflow_id, 'plan g1', tok.other);
            } catch (e) {
              return e;
            }
          })();
          expect(err).toBeInstanceOf(ApprovalRefusedError);
          expect(err).toMatchObject({ code: 'not_an_approver', message: expect.stringContaining('rules: sre, admin') });
          continue;
        }
        const t: Tok = who === 'dup' ? firstSre! : tok[who];
        if (who === 'dup') {
          // a repeated response by the same token: answered, counted once
          const again = answer(run.workflow_id, 'plan g1', t);
          expect(again.status).toBe('awaiting_approval');
          continue;
        }
        if (who !== 'admin' && !firstSre) firstSre = t;
        answer(run.workflow_id, 'plan g1', t);
        counted.push(who);
      }
      const g1After = s.step(run, 'plan g1');
      expect(g1After.status).toBe('succeeded');
      expect(s.step(run, 'plan g2').status).toBe('awaiting_approval');
      const lastRule = counted.at(-1) === 'admin' ? 'admin' : 'sre';
      const evs = approvalEvents(g1.step_id).map((e) => e.approval);
      expect(evs.map((a) => (a.status === 'requested' && a.response ? 'response_recorded' : a.status))).toEqual([
        'requested',
        'response_recorded',
        'response_recorded',
        'response_recorded',
        'approved',
      ]);
      const transitions = s.w
        .events()
        .filter((e) => e.type === 'com.svc.workflow_step.approval.v1' && (e.data as { step: { id: string } }).step.id === g1.step_id)
        .map((e) => String(e.subject).split('/').at(-1));
      expect(transitions).toEqual(['requested', 'response_recorded', 'response_recorded', 'response_recorded', 'approved']);
      expect(evs.at(-1)).toMatchObject({ status: 'approved', decided_by_rule: lastRule });
      expect(g1After.approval).toMatchObject({ status: 'approved', decided_by_rule: lastRule });
      const rules = g1After.approval!.rules as Array<{ name: string; approvals: Array<{ responded_by: Actor }> }>;
      expect(rules[0].approvals.map((a) => a.responded_by.token_name).sort()).toEqual(['sre-a', 'sre-b']);
      expect(rules[1].approvals.map((a) => a.responded_by.token_name)).toEqual(['boss']);
    });
  }

  it('prevent_self_approval (default on): the token that started the run gets self_approval; off, its response counts', () => {
    setPolicy({ rules: [{ name: 'one', required: 1, approvers: { scopes: ['deploy'] } }] });
    const run = s.run([plan('g1'), plan('g2')], { started_by: tok.sreA });
    expect(() => answer(run.workflow_id, 'plan g1', tok.sreA)).toThrow(expect.objectContaining({ code: 'self_approval' }));
    expect(s.step(run, 'plan g1').status).toBe('awaiting_approval');

    setPolicy({ rules: [{ name: 'one', required: 1, approvers: { scopes: ['deploy'] } }], prevent_self_approval: false });
    const run2 = s.run([plan('g1')], { started_by: tok.sreA });
    answer(run2.workflow_id, 'plan g1', tok.sreA);
    expect(s.step(run2, 'plan g1')).toMatchObject({ status: 'succeeded', approval: { decided_by_rule: 'one' } });
  });

  it('expires_after 2m: the step fails approval_expired on the clock, the run fails and its later groups are cancelled', () => {
    setPolicy({ ...TWO_RULES, expires_after: '2m' });
    const run = s.run([plan('g1'), plan('g2'), plan('g3')]);
    const g1 = s.step(run, 'plan g1');
    expect(g1.approval!.expires_at).toBe(new Date(s.clock.now() + 120_000).toISOString());
    answer(run.workflow_id, 'plan g1', tok.sreA);
    s.clock.advance(119_000);
    expect(s.step(run, 'plan g1').status).toBe('awaiting_approval');
    s.clock.advance(1_000);
    expect(s.step(run, 'plan g1')).toMatchObject({ status: 'failed', error: 'approval_expired', approval: { status: 'expired' } });
    expect(s.step(run, 'plan g2').status).toBe('cancelled');
    expect(s.step(run, 'plan g3').status).toBe('cancelled');
    expect(s.wf(run.workflow_id).status).toBe('failed');
    const transitions = approvalEvents(g1.step_id).map((e) => e.approval.status);
    expect(transitions).toEqual(['requested', 'requested', 'expired']);
    expect(() => answer(run.workflow_id, 'plan g1', tok.sreB)).toThrow(/not awaiting approval/);
  });

  it('auto_approve no_destructive: a plan of updates only is approved by the policy; one that removes a component waits', () => {
    setPolicy({ ...TWO_RULES, auto_approve: 'no_destructive' });
    const install = s.install();
    const v2 = s.w.config(s.org, CONFIG_V2, s.config.app_id);
    const updates = s.run([plan('g1', [install.install_id]), plan('g2', [install.install_id])], { app_config_id: v2.app_config_id });
    const g1 = s.step(updates, 'plan g1');
    expect(g1.status).toBe('succeeded');
    expect(g1.approval).toMatchObject({
      status: 'approved',
      responded_by: { type: 'policy', reason: expect.stringMatching(/^no_destructive/) },
    });
    const evs = approvalEvents(g1.step_id).map((e) => e.approval);
    expect(evs.at(-1)).toMatchObject({ status: 'approved', responded_by: { type: 'policy' } });

    const smaller = s.w.config(s.org, { ...CONFIG, components: [CONFIG.components[0]] }, s.config.app_id);
    const removes = s.run([plan('g1', [install.install_id])], { app_config_id: smaller.app_config_id });
    const waiting = s.step(removes, 'plan g1');
    expect(waiting.status).toBe('awaiting_approval');
    expect(waiting.approval).toMatchObject({ auto_approve_declined: expect.stringContaining('removes component worker') });
  });

  it('reject any: one eligible rejection rejects naming its rule; majority waits until a rule can no longer be met', () => {
    setPolicy(TWO_RULES);
    const run = s.run([plan('g1'), plan('g2')]);
    answer(run.workflow_id, 'plan g1', tok.admin, 'rejected');
    expect(s.step(run, 'plan g1')).toMatchObject({ status: 'failed', error: 'approval rejected (rule admin)' });
    expect(s.step(run, 'plan g2').status).toBe('cancelled');

    // 3 sre names but only 2 sre tokens exist: one sre rejection leaves 1 < 2 → lost
    setPolicy({ ...TWO_RULES, reject: 'majority' });
    const run2 = s.run([plan('g1')]);
    answer(run2.workflow_id, 'plan g1', tok.admin, 'rejected');
    expect(s.step(run2, 'plan g1').status).toBe('awaiting_approval');
    answer(run2.workflow_id, 'plan g1', tok.sreA, 'rejected');
    expect(s.step(run2, 'plan g1')).toMatchObject({ status: 'failed', approval: { decided_by_rule: 'sre' } });
  });

  it('a policy change applies to steps still waiting: a lower count approves the step at once', () => {
    setPolicy(TWO_RULES);
    const run = s.run([plan('g1'), plan('g2')]);
    answer(run.workflow_id, 'plan g1', tok.sreA);
    answer(run.workflow_id, 'plan g1', tok.admin);
    expect(s.step(run, 'plan g1').status).toBe('awaiting_approval');
    setPolicy({ rules: [{ ...TWO_RULES.rules[0], required: 1 }, TWO_RULES.rules[1]] });
    s.tx((t) => s.runs.steps.approval.policyChanged(t, s.org, s.config.app_id));
    expect(s.step(run, 'plan g1')).toMatchObject({ status: 'succeeded', approval: { status: 'approved' } });
    expect(s.step(run, 'plan g2').status).toBe('awaiting_approval');
  });

  it('without a policy nothing changes: one response by any token decides, the starter included', () => {
    const run = s.run([plan('g1')], { started_by: tok.other });
    answer(run.workflow_id, 'plan g1', tok.other);
    expect(s.step(run, 'plan g1')).toMatchObject({ status: 'succeeded', approval: { status: 'approved', responded_by: tok.other } });
    expect(s.step(run, 'plan g1').approval).not.toHaveProperty('rules');
  });
});

describe('approval expiry across a restart', () => {
  it("a step whose expiry passes while svc is down fails approval_expired on the restarted engine's scheduler tick", () => {
    const dbFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'svc-approval-')), 'svc.db');
    const before = new EngineWorld({ dbFile });
    const org = before.org();
    const config = before.config(org);
    putAppApprovalPolicy(
      before.db,
      org,
      config.app_id,
      approvalPolicyInSchema.parse({ rules: [{ name: 'ops', required: 1, approvers: { scopes: ['admin'] } }], expires_after: '2m' }),
      new Date().toISOString(),
    );
    const install = before.install(org, config);
    const run = before.engine.startBranchRun(org, config.app_id, 'br_1', config, [{ name: 'g1', install_ids: [install.install_id] }], true);
    const plan = () => listSteps(after.db, run.workflow_id).find((s) => s.name === 'plan install group: g1')!;
    let after = before;
    expect(plan().status).toBe('awaiting_approval');
    before.close();

    // the new process: no timer armed by the old one; only the scheduler's tick looks
    after = new EngineWorld({ dbFile });
    try {
      after.schedule();
      after.clock.advance(119_000);
      expect(plan().status).toBe('awaiting_approval');
      after.clock.advance(2_000);
      expect(plan()).toMatchObject({ status: 'failed', error: 'approval_expired' });
      expect(getWorkflow(after.db, run.workflow_id)!.status).toBe('failed');
    } finally {
      after.close();
    }
  });
});
