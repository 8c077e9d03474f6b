// Verification gates, the part inside transactions (CONTRACT 4.3 `verification`): a `verify install
// group` step feeds its machine (machines/verification-gate.ts) the engine's clock and the answers of
// its URLs; the machine, typed, is kept in the step's params (`verify`: per URL its attempts,
// failures in a row, first and next ask, last answer). What it asks is sent by the Verifier
// (./verify-requests.ts) after the commit, outside any transaction; each answer comes back here in a
// transaction of its own. A pass of every URL ends the step; a fail (or too many failures, or
// `max_wait`) records the run's rollout (`trigger: "verification"`), fails the step, cancels the
// later groups and, with `on_failure: "rollback"`, adds the rollback steps.
//
// Where it sits: right after the group's deploy and before its bake (deploy → verify → bake), so
// the URLs are asked as soon as the group is deployed (CONTRACT: "after a group's deploy … at
// once"), and the group moves on only once every verification passed AND then its bake elapsed
// with the gate clean. A verdict that went bad during verification and is still bad when the bake
// starts trips it (a verdict already bad at the bake's start counts).
import { z } from 'zod';
import { getInstallById } from '../../../store/installs.ts';
import { getStep, getWorkflow, listSteps, updateStep, type StepRow, type WorkflowRow } from '../../../store/workflows.ts';
import {
  advanceVerification,
  initialVerification,
  nextWakeOf,
  verifySnapshotOf,
  type VerifyEvent,
  type VerifyFailure,
  type VerifySnapshot,
} from '../../../machines/verification-gate.ts';
import type { Rollout } from '../../domain/rollout.ts';
import { shownUrl, verificationsOf, verifyAnswerSchema, type Verification, type VerifyAnswer } from '../../domain/verification.ts';
import type { VerificationRequest, VerifiedInstall } from '../../events/verification-request.ts';
import { runTargetOf } from '../rollout-plans.ts';
import type { Tx } from '../transaction.ts';
import { GroupGate } from './group-failure.ts';
import type { StepHandler } from './handlers.ts';
import { configsBeforeOf, groupStepOf } from './state.ts';

/** One request to make now: to which verification, and the event it carries (without envelope). */
export interface VerifyAsk {
  index: number;
  verification: Verification;
  request: VerificationRequest;
}

/** What a poll or an answer leaves to do: requests to make, and when to look again (null: the step ended). */
export interface VerifyNext {
  asks: VerifyAsk[];
  wakeAt: number | null;
}

/** How many verification answers a verify step keeps (the latest). */
export const VERIFY_ANSWERS_KEPT = 50;

const NOTHING: VerifyNext = { asks: [], wakeAt: null };

/** A group's install as the requests name it (events/verification.ts VerifiedInstall). */
const verifiedInstallSchema = z.object({
  install_id: z.string(),
  install_name: z.string(),
  labels: z.record(z.string(), z.string()),
  old_app_config_id: z.string().nullable(),
  new_app_config_id: z.string().nullable(),
}) satisfies z.ZodType<VerifiedInstall>;

/** An answer as a verify step keeps it: to which URL and attempt, when (ms, engine clock), and what it said. */
const keptAnswerSchema = verifyAnswerSchema.omit({ at: true }).extend({
  index: z.number(),
  attempt: z.number().nullable(),
  at: z.number(),
});

/** What a verify step keeps in its params besides its machine (`verify`): its installs and the answers it heard. */
const verifyStateSchema = z.object({
  installs: z.array(verifiedInstallSchema).default([]),
  verify_answers: z.array(keptAnswerSchema).default([]),
});
const verifyStateOf = (step: StepRow) => verifyStateSchema.parse(step.params);

export class VerifySteps extends GroupGate implements StepHandler {
  /** Begin a verify step: every URL is to be asked at once (after the commit). Never ends at once. */
  begin(t: Tx, wf: WorkflowRow, step: StepRow): boolean {
    const started = this.facts.stepEventRow(t, wf, step, { type: 'start' }) ?? step;
    const at = Date.parse(t.now);
    const verify = initialVerification({
      checks: verificationsOf(wf.params).map((v) => ({
        shown: shownUrl(v.url),
        interval_ms: v.interval_ms,
        max_wait_ms: v.max_wait_ms,
        failure_limit: v.failure_limit,
      })),
      at,
    });
    updateStep(this.db, {
      workflow_id: wf.workflow_id,
      step_id: step.step_id,
      params: { ...started.params, verify, installs: this.installsOf(wf, step) },
    });
    this.wakeups.verifyAt(wf.workflow_id, step.step_id, at);
    return false;
  }

  /** A verify step has no child workflows. */
  childEnded(): boolean {
    return false;
  }

  /** The clock moved (a wake): the URLs due are asked (`busy`: those whose request is still in flight here). */
  tick(t: Tx, workflowId: string, stepId: string, busy: number[]): VerifyNext {
    const found = this.running(workflowId, stepId);
    if (!found) return NOTHING;
    return this.feed(t, found.wf, found.step, { type: 'tick', at: Date.parse(t.now), busy });
  }

  /** URL `index` answered. */
  answer(t: Tx, workflowId: string, stepId: string, index: number, answer: Omit<VerifyAnswer, 'at'>): VerifyNext {
    const found = this.running(workflowId, stepId);
    if (!found) return NOTHING;
    return this.feed(t, found.wf, found.step, { type: 'answer', index, at: Date.parse(t.now), answer });
  }

  /** When a running verify step is next to be looked at (restart: from what SQLite holds); null when it is not running. */
  wakeAtOf(workflowId: string, stepId: string): number | null {
    const found = this.running(workflowId, stepId);
    return found ? nextWakeOf(found.gate) : null;
  }

  private running(workflowId: string, stepId: string): { wf: WorkflowRow; step: StepRow; gate: VerifySnapshot } | null {
    const wf = getWorkflow(this.db, workflowId);
    const step = wf && getStep(this.db, workflowId, stepId);
    const gate = step && verifySnapshotOf(step.params);
    if (!wf || !step || !gate || step.status !== 'started' || gate.state !== 'verifying') return null;
    return { wf, step, gate };
  }

  private feed(t: Tx, wf: WorkflowRow, step: StepRow, ev: VerifyEvent): VerifyNext {
    const gate = verifySnapshotOf(step.params)!;
    const r = advanceVerification(gate.state, gate.context, ev);
    if (!r.changed) return { asks: [], wakeAt: nextWakeOf(gate) };
    const verify: VerifySnapshot = { state: r.state, context: r.context };
    // each answer, for the rollout page (the latest VERIFY_ANSWERS_KEPT; no event or API answer carries it)
    const answers =
      ev.type === 'answer'
        ? {
            verify_answers: [
              ...verifyStateOf(step).verify_answers,
              { index: ev.index, attempt: gate.context.checks[ev.index]?.attempt ?? null, at: ev.at, ...ev.answer },
            ].slice(-VERIFY_ANSWERS_KEPT),
          }
        : {};
    const fresh = updateStep(this.db, {
      workflow_id: step.workflow_id,
      step_id: step.step_id,
      params: { ...step.params, verify, ...answers },
    })!;
    const asks: VerifyAsk[] = [];
    for (const e of r.emitted) {
      if (e.type === 'ask') asks.push(...e.asks.map((a) => this.askOf(t, wf, fresh, a.index, a.attempt)));
      if (e.type === 'passed') {
        if (this.facts.stepEvent(t, wf, fresh, { type: 'succeed' })) this.run.advance(t, wf.workflow_id);
      }
      if (e.type === 'failed') this.groupFailed(t, wf, fresh, e.failure);
    }
    return { asks, wakeAt: nextWakeOf(verify) };
  }

  private askOf(t: Tx, wf: WorkflowRow, step: StepRow, index: number, attempt: number): VerifyAsk {
    return {
      index,
      verification: verificationsOf(wf.params)[index],
      request: {
        org_id: wf.org_id,
        time: t.now,
        workflow: { id: wf.workflow_id, type: wf.type, owner_id: wf.owner_id, owner_type: wf.owner_type },
        step: {
          id: step.step_id,
          name: step.name,
          idx: step.idx,
          target_type: step.target_type,
          target_id: step.target_id,
          component_id: step.component_id,
          sandbox_id: step.sandbox_id,
          execution_type: step.execution_type,
        },
        rollout: {
          run_id: wf.workflow_id,
          group: String(groupStepOf(step).group),
          attempt,
          installs: verifyStateOf(step).installs,
        },
      },
    };
  }

  /**
   * A verification failed the group: the run records why (its events carry `rollout` from now on),
   * the step fails, later groups are cancelled and, to roll back, every group deployed (this one
   * included) gets a rollback step, newest first.
   */
  private groupFailed(t: Tx, wf: WorkflowRow, step: StepRow, failure: VerifyFailure): void {
    const rollout: Rollout = {
      run_id: wf.workflow_id,
      trigger: 'verification',
      ...(failure.reason !== null ? { reason: failure.reason } : {}),
    };
    const run = this.failGroup(t, wf, step, rollout, failure.error);
    this.run.advance(t, run.workflow_id);
  }

  /** The group's installs as the requests name them: each one's config before the run (its deploy's record) and the run's target. */
  private installsOf(wf: WorkflowRow, step: StepRow): VerifiedInstall[] {
    const deploy = listSteps(this.db, wf.workflow_id).find(
      (s) => s.params.kind === 'children' && !s.params.rollback && s.params.group === step.params.group,
    );
    const before = configsBeforeOf(deploy);
    return groupStepOf(step).install_ids.flatMap((id) => {
      const i = getInstallById(this.db, id);
      if (!i) return [];
      return [
        {
          install_id: id,
          install_name: i.name,
          labels: i.labels,
          old_app_config_id: before[id] ?? null,
          new_app_config_id: runTargetOf(wf, id) ?? null,
        },
      ];
    });
  }
}
