// Health gates (CONTRACT 4.3): a bake step feeds its gate machine (machines/health-gate.ts) the
// group's verdicts and the engine's clock; the gate, typed, is kept in the step's params. A pass
// ends the step; a trip records the run's rollout, fails the bake, cancels later groups and, with
// `action: "rollback"`, adds the rollback steps.
import { z } from 'zod';
import { getComponent, getInstallById } from '../../../store/installs.ts';
import { getWorkflow, listBakingSteps, updateStep, type StepRow, type WorkflowRow } from '../../../store/workflows.ts';
import {
  advanceHealthGate,
  gateSnapshotOf,
  initialHealthGate,
  type GateEmit,
  type GateEvent,
  type GateSnapshot,
  type GateTrip,
} from '../../../machines/health-gate.ts';
import { compositeVerdict } from '../../../machines/health.ts';
import { GATE_VERDICTS, rolloutParamsOf, type Rollout } from '../../domain/rollout.ts';
import { tripError } from '../rollout-plans.ts';
import type { Tx } from '../transaction.ts';
import { GroupGate } from './group-failure.ts';
import type { StepHandler } from './handlers.ts';
import { groupStepOf } from './state.ts';

export class HealthGates extends GroupGate implements StepHandler {
  /** Begin a bake: the gate starts from the group's verdicts now (one already bad counts). Returns whether it ended at once. */
  begin(t: Tx, wf: WorkflowRow, step: StepRow): boolean {
    const started = this.facts.stepEventRow(t, wf, step, { type: 'start' }) ?? step;
    const { gate } = rolloutParamsOf(wf.params);
    const at = Date.parse(t.now);
    const from = initialHealthGate({ on: gate?.on ?? [...GATE_VERDICTS], ends_at: at + (gate?.bake_ms ?? 0), for_ms: gate?.for_ms ?? 0 });
    const now = groupStepOf(step)
      .install_ids.map((id) => this.healthNow(id, at))
      .filter((e): e is GateEvent => e !== null);
    return this.feedGate(t, wf, started, [...now, { type: 'tick', at }], from);
  }

  /** A bake has no child workflows. */
  childEnded(): boolean {
    return false;
  }

  /** A verdict changed an install's health: the bakes watching it see its composite verdict. */
  installHealthChanged(t: Tx, orgId: string, installId: string): void {
    for (const step of listBakingSteps(this.db, orgId)) {
      if (!groupStepOf(step).install_ids.includes(installId)) continue;
      const ev = this.healthNow(installId, Date.parse(t.now));
      const wf = getWorkflow(this.db, step.workflow_id);
      if (!ev || !wf) continue;
      if (this.feedGate(t, wf, step, [ev])) this.run.advance(t, wf.workflow_id);
    }
  }

  /** The engine's clock moved: bakes whose time is up pass. */
  bakeTick(t: Tx): void {
    const at = Date.parse(t.now);
    for (const step of listBakingSteps(this.db)) {
      const wf = getWorkflow(this.db, step.workflow_id);
      if (wf && this.feedGate(t, wf, step, [{ type: 'tick', at }])) this.run.advance(t, wf.workflow_id);
    }
  }

  /** An install's composite verdict now (`at`), with the component behind it and that component's reason; null when none is known. */
  private healthNow(installId: string, at: number): GateEvent | null {
    const install = getInstallById(this.db, installId);
    if (!install) return null;
    const verdicts = install.health_ctx.verdicts;
    const verdict = compositeVerdict(verdicts);
    if (!verdict) return null;
    const componentId = Object.keys(verdicts).find((id) => verdicts[id] === verdict)!;
    return {
      type: 'health',
      install_id: installId,
      component_id: componentId,
      verdict,
      reason: getComponent(this.db, installId, componentId)?.health_reason ?? null,
      at,
    };
  }

  /** Feed a baking step's gate; act on what it emits (pass: the step succeeds; trip: it fails). Returns whether the step ended. */
  private feedGate(t: Tx, wf: WorkflowRow, step: StepRow, events: GateEvent[], from?: GateSnapshot): boolean {
    let gate = from ?? gateSnapshotOf(step.params);
    if (!gate) throw new Error(`bake step ${step.step_id} has no health gate`);
    const emitted: GateEmit[] = [];
    for (const ev of events) {
      const r = advanceHealthGate(gate.state, gate.context, ev);
      if (!r.changed) continue;
      gate = { state: r.state, context: r.context };
      emitted.push(...r.emitted);
    }
    const seen = verdictsSeen(step.params, events);
    const fresh = updateStep(this.db, {
      workflow_id: step.workflow_id,
      step_id: step.step_id,
      params: { ...step.params, gate, ...(seen ? { bake_verdicts: seen } : {}) },
    })!;
    // a streak that started with these events trips once it has lasted `for`: tick at that moment
    if (gate.state === 'baking') {
      for (const s of Object.values(gate.context.streaks)) {
        if (events.some((e) => e.type === 'health' && e.install_id === s.trip.install_id && e.at === s.since))
          this.wakeups.bakesAt(s.since + gate.context.for_ms);
      }
    }
    for (const e of emitted) {
      if (e.type === 'passed') return this.facts.stepEvent(t, wf, fresh, { type: 'succeed' });
      if (e.type === 'tripped') {
        this.tripGate(t, wf, fresh, e.trip);
        return true;
      }
    }
    return false;
  }

  /**
   * The gate tripped: the run records why (its events carry `rollout` from now on), the bake fails,
   * later groups are cancelled and, to roll back (`on_failure`, else the gate's `action`), every group already deployed gets a
   * rollback step, newest first, back to the configs its installs had before the run.
   */
  private tripGate(t: Tx, wf: WorkflowRow, step: StepRow, trip: GateTrip): void {
    const rollout: Rollout = { run_id: wf.workflow_id, trigger: 'health_gate', ...trip };
    this.failGroup(t, wf, step, rollout, tripError(this.db, trip));
  }
}

/** How many verdict changes a bake keeps (the latest; for its rollout page). */
export const BAKE_VERDICTS_KEPT = 50;

/** A verdict the bake saw: an install's composite verdict from `at` on (ms, engine clock). */
const bakeVerdictSchema = z.object({
  at: z.number(),
  install_id: z.string(),
  component_id: z.string(),
  verdict: z.string(),
  reason: z.string().nullable(),
});
export type BakeVerdict = z.infer<typeof bakeVerdictSchema>;

/** The verdicts a bake keeps in its params (`bake_verdicts`; none before its first). */
const bakeVerdictsSchema = z.object({ bake_verdicts: z.array(bakeVerdictSchema).default([]) });

/**
 * The verdicts a bake has seen (params.bake_verdicts) after `events`: each change of an install's
 * composite verdict (or of the component behind it), the latest BAKE_VERDICTS_KEPT; null when
 * nothing changed. Only the rollout page reads it; no event or API answer carries it.
 */
export function verdictsSeen(params: Record<string, unknown>, events: GateEvent[]): BakeVerdict[] | null {
  const kept = bakeVerdictsSchema.parse(params).bake_verdicts;
  const next = [...kept];
  for (const e of events) {
    if (e.type !== 'health') continue;
    let last: BakeVerdict | undefined;
    for (const v of next) if (v.install_id === e.install_id) last = v;
    if (last && last.verdict === e.verdict && last.component_id === e.component_id) continue;
    next.push({ at: e.at, install_id: e.install_id, component_id: e.component_id, verdict: e.verdict, reason: e.reason ?? null });
  }
  return next.length === kept.length ? null : next.slice(-BAKE_VERDICTS_KEPT);
}
