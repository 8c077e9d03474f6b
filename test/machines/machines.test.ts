import { describe, expect, it } from 'vitest';
import { advance, initial, jsonEqual } from '../../machines/advance.ts';
import {
  advanceComponentHealth,
  advanceInstallHealth,
  componentHealthMachine,
  compositeVerdict,
  initialComponentHealth,
  initialInstallHealth,
  installHealthMachine,
} from '../../machines/health.ts';
import {
  advanceRunner,
  initialRunner,
  runnerMachine,
  RUNNER_REASON_NO_HEARTBEAT,
  RUNNER_REASON_PROCESS_MISSING,
} from '../../machines/runner.ts';
import { advanceStep, initialStep, stepMachine } from '../../machines/step.ts';
import { advanceWorkflow, initialWorkflow, workflowMachine, workflowOutcome } from '../../machines/workflow.ts';
import type { ComponentHealthContext, HealthStatus, InstallHealthContext, InstallHealthEvent } from '../../machines/health.ts';
import type { RunnerContext, RunnerEvent, RunnerStatus } from '../../machines/runner.ts';
import type { StepEvent, StepEmit, StepStatus } from '../../machines/step.ts';
import type { WorkflowEvent, WorkflowStatus } from '../../machines/workflow.ts';

const loud = { silent: false };
const quiet = { silent: true };

const L = (transition: 'started' | 'succeeded' | 'failed' | 'cancelled', error?: string): StepEmit =>
  error === undefined ? { type: 'lifecycle', transition } : { type: 'lifecycle', transition, error };
const A = (transition: 'requested' | 'approved' | 'rejected'): StepEmit => ({ type: 'approval', transition });

const ALL_STEP_EVENTS: StepEvent[] = [
  { type: 'start' },
  { type: 'succeed' },
  { type: 'fail', error: 'boom' },
  { type: 'cancel' },
  { type: 'skip' },
  { type: 'request_approval' },
  { type: 'approve' },
  { type: 'reject' },
];

// ---------------------------------------------------------------------------
describe('advance / initial', () => {
  it('initial returns the initial state and context of each machine', () => {
    expect(initial(stepMachine)).toEqual({ state: 'pending', context: { silent: false } });
    expect(initial(stepMachine, { silent: true })).toEqual({ state: 'pending', context: { silent: true } });
    expect(initialStep({ silent: true })).toEqual({ state: 'pending', context: { silent: true } });
    expect(initialWorkflow()).toEqual({ state: 'pending', context: {} });
    expect(initial(workflowMachine)).toEqual({ state: 'pending', context: {} });
    expect(initialRunner()).toEqual({ state: 'pending', context: { heartbeatSinceCheck: false, lastProcess: null } });
    expect(initial(runnerMachine)).toEqual(initialRunner());
    expect(initialComponentHealth()).toEqual({ state: 'ok', context: { verdict: null } });
    expect(initial(componentHealthMachine)).toEqual(initialComponentHealth());
    expect(initialInstallHealth()).toEqual({ state: 'ok', context: { verdicts: {} } });
    expect(initial(installHealthMachine)).toEqual(initialInstallHealth());
  });

  it('generic advance rehydrates from a plain status string + JSON context', () => {
    const persisted = JSON.parse(JSON.stringify({ state: 'started', context: { silent: false } }));
    const r = advance<StepStatus, { silent: boolean }, StepEmit>(stepMachine, persisted.state, persisted.context, {
      type: 'fail',
      error: 'disk full',
    });
    expect(r).toEqual({
      state: 'failed',
      context: { silent: false },
      emitted: [L('failed', 'disk full')],
      changed: true,
      accepted: true,
    });
    // result is plain JSON and round-trips
    expect(JSON.parse(JSON.stringify({ s: r.state, c: r.context }))).toEqual({ s: 'failed', c: { silent: false } });
  });

  it('a rejected event returns the input state and context unchanged', () => {
    const ctx = { silent: false };
    const r = advance(stepMachine, 'succeeded', ctx, { type: 'start' });
    expect(r.state).toBe('succeeded');
    expect(r.context).toBe(ctx);
    expect(r.emitted).toEqual([]);
    expect(r.changed).toBe(false);
    expect(r.accepted).toBe(false);
  });

  it('an unknown event type is not accepted', () => {
    const r = advance(stepMachine, 'pending', loud, { type: 'bogus' });
    expect(r).toMatchObject({ state: 'pending', emitted: [], changed: false, accepted: false });
  });

  it('an invalid persisted state throws', () => {
    expect(() => advance(stepMachine, 'nope', loud, { type: 'start' })).toThrow();
  });

  it('does not mutate the context passed in', () => {
    const ctx: RunnerContext = { heartbeatSinceCheck: false, lastProcess: null };
    const frozen = Object.freeze({ ...ctx });
    const r = advanceRunner('pending', frozen, { type: 'heartbeat', process: 'running' });
    expect(frozen).toEqual(ctx);
    expect(r.context).toEqual({ heartbeatSinceCheck: true, lastProcess: 'running' });
  });

  it('jsonEqual compares structurally', () => {
    expect(jsonEqual({ a: 1, b: { c: [1, 2] } }, { b: { c: [1, 2] }, a: 1 })).toBe(true);
    expect(jsonEqual({ a: 1 }, { a: 2 })).toBe(false);
    expect(jsonEqual({ a: 1 }, { a: 1, b: 2 })).toBe(false);
    expect(jsonEqual([1], [1, 2])).toBe(false);
    expect(jsonEqual(null, {})).toBe(false);
  });
});

// ---------------------------------------------------------------------------
describe('step machine', () => {
  const legal: Array<[StepStatus, StepEvent, StepStatus, StepEmit[]]> = [
    ['pending', { type: 'start' }, 'started', [L('started')]],
    ['pending', { type: 'succeed' }, 'succeeded', [L('started'), L('succeeded')]],
    ['pending', { type: 'fail', error: 'missing input: region' }, 'failed', [L('started'), L('failed', 'missing input: region')]],
    ['pending', { type: 'fail' }, 'failed', [L('started'), L('failed')]],
    ['pending', { type: 'cancel' }, 'cancelled', []],
    ['pending', { type: 'skip' }, 'skipped', []],
    ['pending', { type: 'request_approval' }, 'awaiting_approval', [L('started'), A('requested')]],
    ['awaiting_approval', { type: 'approve' }, 'succeeded', [A('approved'), L('succeeded')]],
    ['awaiting_approval', { type: 'reject' }, 'failed', [A('rejected'), L('failed', 'rejected')]],
    ['awaiting_approval', { type: 'reject', error: 'plan too risky' }, 'failed', [A('rejected'), L('failed', 'plan too risky')]],
    ['awaiting_approval', { type: 'cancel' }, 'cancelled', [L('cancelled')]],
    ['started', { type: 'succeed' }, 'succeeded', [L('succeeded')]],
    ['started', { type: 'fail', error: 'boom' }, 'failed', [L('failed', 'boom')]],
    ['started', { type: 'fail' }, 'failed', [L('failed')]],
    ['started', { type: 'cancel' }, 'cancelled', [L('cancelled')]],
  ];

  for (const [from, ev, to, facts] of legal) {
    it(`${from} --${ev.type}${'error' in ev && ev.error ? `(${ev.error})` : ''}--> ${to} emits ${facts.length} fact(s)`, () => {
      const r = advanceStep(from, loud, ev);
      expect(r.state).toBe(to);
      expect(r.context).toEqual(loud);
      expect(r.emitted).toEqual(facts);
      expect(r.changed).toBe(true);
      expect(r.accepted).toBe(true);
    });

    it(`silent: ${from} --${ev.type}--> ${to} changes state, emits nothing`, () => {
      const r = advanceStep(from, quiet, ev);
      expect(r.state).toBe(to);
      expect(r.context).toEqual(quiet);
      expect(r.emitted).toEqual([]);
      expect(r.changed).toBe(true);
    });
  }

  it('the lifecycle payload has no error key when no error is given', () => {
    const r = advanceStep('started', loud, { type: 'succeed' });
    expect(Object.keys(r.emitted[0])).toEqual(['type', 'transition']);
    const f = advanceStep('started', loud, { type: 'fail' });
    expect('error' in f.emitted[0]).toBe(false);
  });

  // every (state, event) pair not listed as legal is not accepted
  const states: StepStatus[] = ['pending', 'started', 'awaiting_approval', 'skipped', 'succeeded', 'failed', 'cancelled'];
  const isLegal = (s: StepStatus, e: StepEvent) => legal.some(([f, ev]) => f === s && ev.type === e.type);
  for (const s of states) {
    for (const e of ALL_STEP_EVENTS) {
      if (isLegal(s, e)) continue;
      it(`${s} ignores ${e.type}`, () => {
        for (const ctx of [loud, quiet]) {
          const r = advanceStep(s, ctx, e);
          expect(r).toEqual({ state: s, context: ctx, emitted: [], changed: false, accepted: false });
        }
      });
    }
  }

  it('explicit illegal cases: second start, start after terminal, approve when not awaiting, succeed twice', () => {
    expect(advanceStep('started', loud, { type: 'start' }).changed).toBe(false);
    expect(advanceStep('succeeded', loud, { type: 'start' }).changed).toBe(false);
    expect(advanceStep('failed', loud, { type: 'start' }).changed).toBe(false);
    expect(advanceStep('started', loud, { type: 'approve' }).changed).toBe(false);
    expect(advanceStep('pending', loud, { type: 'approve' }).changed).toBe(false);
    expect(advanceStep('pending', loud, { type: 'reject' }).changed).toBe(false);
    expect(advanceStep('succeeded', loud, { type: 'succeed' }).changed).toBe(false);
    expect(advanceStep('cancelled', loud, { type: 'fail', error: 'x' }).emitted).toEqual([]);
    expect(advanceStep('awaiting_approval', loud, { type: 'succeed' }).changed).toBe(false);
    expect(advanceStep('awaiting_approval', loud, { type: 'request_approval' }).changed).toBe(false);
  });

  it('a full run: start, then succeed, then duplicates are ignored', () => {
    let s = initialStep();
    const out: StepEmit[] = [];
    const changes: boolean[] = [];
    const events: StepEvent[] = [
      { type: 'start' },
      { type: 'start' },
      { type: 'succeed' },
      { type: 'succeed' },
      { type: 'fail', error: 'late' },
    ];
    for (const e of events) {
      const r = advanceStep(s.state, s.context, e);
      out.push(...r.emitted);
      changes.push(r.changed);
      s = { state: r.state, context: r.context };
    }
    expect(s.state).toBe('succeeded');
    expect(out).toEqual([L('started'), L('succeeded')]);
    expect(changes).toEqual([true, false, true, false, false]);
  });

  it('approval handshake run', () => {
    let s = initialStep();
    const out: StepEmit[] = [];
    for (const e of [{ type: 'request_approval' }, { type: 'approve' }, { type: 'approve' }] as StepEvent[]) {
      const r = advanceStep(s.state, s.context, e);
      out.push(...r.emitted);
      s = { state: r.state, context: r.context };
    }
    expect(s.state).toBe('succeeded');
    expect(out).toEqual([L('started'), A('requested'), A('approved'), L('succeeded')]);
  });

  it('emitted payloads are fresh objects (not shared between calls)', () => {
    const a = advanceStep('pending', loud, { type: 'start' });
    (a.emitted[0] as { transition: string }).transition = 'mutated';
    const b = advanceStep('pending', loud, { type: 'start' });
    expect(b.emitted).toEqual([L('started')]);
  });
});

// ---------------------------------------------------------------------------
describe('workflow machine', () => {
  const done: StepStatus[] = ['succeeded', 'skipped', 'succeeded'];
  const fin = (outcome: 'succeeded' | 'failed' | 'cancelled', stepStatuses: StepStatus[], error?: string): WorkflowEvent =>
    error === undefined ? { type: 'finish', outcome, stepStatuses } : { type: 'finish', outcome, stepStatuses, error };

  it('pending --start--> started emits lifecycle started', () => {
    const r = advanceWorkflow('pending', {}, { type: 'start' });
    expect(r).toEqual({
      state: 'started',
      context: {},
      emitted: [{ type: 'lifecycle', transition: 'started' }],
      changed: true,
      accepted: true,
    });
  });

  for (const outcome of ['succeeded', 'failed', 'cancelled'] as const) {
    it(`started --finish(${outcome})--> ${outcome} emits lifecycle ${outcome}`, () => {
      const steps: StepStatus[] =
        outcome === 'failed' ? ['succeeded', 'failed', 'cancelled'] : outcome === 'cancelled' ? ['cancelled'] : done;
      const r = advanceWorkflow('started', {}, fin(outcome, steps));
      expect(r.state).toBe(outcome);
      expect(r.emitted).toEqual([{ type: 'lifecycle', transition: outcome }]);
      expect(r.changed).toBe(true);
    });

    it(`pending --finish(${outcome})--> ${outcome} emits started then ${outcome}`, () => {
      const r = advanceWorkflow('pending', {}, fin(outcome, ['skipped'], outcome === 'failed' ? 'bad input' : undefined));
      expect(r.state).toBe(outcome);
      expect(r.emitted).toEqual([
        { type: 'lifecycle', transition: 'started' },
        outcome === 'failed' ? { type: 'lifecycle', transition: 'failed', error: 'bad input' } : { type: 'lifecycle', transition: outcome },
      ]);
    });
  }

  it('failed outcome carries the error', () => {
    const r = advanceWorkflow('started', {}, fin('failed', ['failed', 'cancelled'], 'job exploded'));
    expect(r.emitted).toEqual([{ type: 'lifecycle', transition: 'failed', error: 'job exploded' }]);
  });

  it('no error key when none is given', () => {
    const r = advanceWorkflow('started', {}, fin('succeeded', done));
    expect('error' in r.emitted[0]).toBe(false);
  });

  it('a workflow with no steps can finish', () => {
    expect(advanceWorkflow('started', {}, fin('succeeded', [])).state).toBe('succeeded');
  });

  for (const blocking of ['pending', 'started', 'awaiting_approval'] as StepStatus[]) {
    for (const from of ['pending', 'started'] as WorkflowStatus[]) {
      it(`${from}: finish while a step is ${blocking} is not accepted`, () => {
        const r = advanceWorkflow(from, {}, fin('succeeded', ['succeeded', blocking]));
        expect(r).toEqual({ state: from, context: {}, emitted: [], changed: false, accepted: false });
        const f = advanceWorkflow(from, {}, fin('failed', ['failed', blocking], 'x'));
        expect(f.changed).toBe(false);
        expect(f.emitted).toEqual([]);
      });
    }
  }

  it('finish with a garbage step status is not accepted', () => {
    const r = advanceWorkflow('started', {}, { type: 'finish', outcome: 'succeeded', stepStatuses: ['done' as StepStatus] });
    expect(r.changed).toBe(false);
  });

  it('started ignores a second start', () => {
    expect(advanceWorkflow('started', {}, { type: 'start' })).toEqual({
      state: 'started',
      context: {},
      emitted: [],
      changed: false,
      accepted: false,
    });
  });

  for (const terminal of ['succeeded', 'failed', 'cancelled'] as WorkflowStatus[]) {
    it(`${terminal} accepts nothing`, () => {
      const events: WorkflowEvent[] = [
        { type: 'start' },
        fin('succeeded', done),
        fin('failed', ['failed'], 'x'),
        fin('cancelled', ['cancelled']),
      ];
      for (const e of events) {
        expect(advanceWorkflow(terminal, {}, e)).toEqual({
          state: terminal,
          context: {},
          emitted: [],
          changed: false,
          accepted: false,
        });
      }
    });
  }

  it('workflowOutcome', () => {
    expect(workflowOutcome([])).toBe('succeeded');
    expect(workflowOutcome(['succeeded', 'skipped'])).toBe('succeeded');
    expect(workflowOutcome(['succeeded', 'failed', 'cancelled'])).toBe('failed');
    expect(workflowOutcome(['cancelled', 'failed'])).toBe('failed');
    expect(workflowOutcome(['succeeded', 'cancelled', 'skipped'])).toBe('cancelled');
    expect(workflowOutcome(['succeeded', 'started'])).toBeNull();
    expect(workflowOutcome(['failed', 'pending'])).toBeNull();
    expect(workflowOutcome(['awaiting_approval'])).toBeNull();
  });

  it('a provision run: workflow terminal only after every step is terminal', () => {
    let wf = initialWorkflow();
    let steps: Array<{ state: StepStatus; context: { silent: boolean } }> = [initialStep(), initialStep(), initialStep({ silent: true })];
    const facts: string[] = [];
    const wfStep = (e: WorkflowEvent) => {
      const r = advanceWorkflow(wf.state, wf.context, e);
      for (const f of r.emitted) facts.push(`wf:${f.transition}`);
      wf = { state: r.state, context: r.context };
      return r;
    };
    const stStep = (i: number, e: StepEvent) => {
      const r = advanceStep(steps[i].state, steps[i].context, e);
      for (const f of r.emitted) facts.push(`s${i}:${f.transition}`);
      steps = steps.map((s, j) => (j === i ? { state: r.state, context: r.context } : s));
      return r;
    };
    const statuses = () => steps.map((s) => s.state);
    wfStep({ type: 'start' });
    stStep(0, { type: 'start' });
    stStep(0, { type: 'succeed' });
    stStep(1, { type: 'fail', error: 'boom' });
    // early finish attempt while step 2 is pending: ignored
    expect(workflowOutcome(statuses())).toBeNull();
    expect(wfStep({ type: 'finish', outcome: 'failed', error: 'boom', stepStatuses: statuses() }).changed).toBe(false);
    stStep(2, { type: 'cancel' });
    const outcome = workflowOutcome(statuses());
    expect(outcome).toBe('failed');
    expect(wfStep({ type: 'finish', outcome: outcome!, error: 'boom', stepStatuses: statuses() }).changed).toBe(true);
    expect(facts).toEqual(['wf:started', 's0:started', 's0:succeeded', 's1:started', 's1:failed', 'wf:failed']);
  });
});

// ---------------------------------------------------------------------------
describe('runner machine', () => {
  const ctx = (heartbeatSinceCheck: boolean, lastProcess: 'running' | 'missing' | null): RunnerContext => ({
    heartbeatSinceCheck,
    lastProcess,
  });
  const hbRun: RunnerEvent = { type: 'heartbeat', process: 'running' };
  const hbMiss: RunnerEvent = { type: 'heartbeat', process: 'missing' };
  const check: RunnerEvent = { type: 'check' };

  it('pending + running heartbeat -> active, no event', () => {
    const r = advanceRunner('pending', ctx(false, null), hbRun);
    expect(r).toEqual({ state: 'active', context: ctx(true, 'running'), emitted: [], changed: true, accepted: true });
  });

  it('pending + missing heartbeat -> stays pending, records it', () => {
    const r = advanceRunner('pending', ctx(false, null), hbMiss);
    expect(r).toEqual({ state: 'pending', context: ctx(false, 'missing'), emitted: [], changed: true, accepted: true });
  });

  it('pending + check -> nothing', () => {
    const r = advanceRunner('pending', ctx(false, null), check);
    expect(r).toEqual({ state: 'pending', context: ctx(false, null), emitted: [], changed: false, accepted: false });
  });

  for (const state of ['pending', 'active', 'offline'] as RunnerStatus[]) {
    it(`${state} + inactive emits inactive and keeps the health state`, () => {
      const c = ctx(state === 'active', state === 'pending' ? null : 'running');
      const r = advanceRunner(state, c, { type: 'inactive', reason: 'deprovisioned' });
      expect(r.state).toBe(state);
      expect(r.context).toEqual(c);
      expect(r.emitted).toEqual([{ type: 'inactive', reason: 'deprovisioned' }]);
      expect(r.changed).toBe(true);
      const n = advanceRunner(state, c, { type: 'inactive' });
      expect(n.emitted).toEqual([{ type: 'inactive' }]);
    });
  }

  it('active + running heartbeat sets heartbeatSinceCheck', () => {
    const r = advanceRunner('active', ctx(false, 'running'), hbRun);
    expect(r).toEqual({ state: 'active', context: ctx(true, 'running'), emitted: [], changed: true, accepted: true });
  });

  it('active + repeated running heartbeat is accepted but changes nothing', () => {
    const r = advanceRunner('active', ctx(true, 'running'), hbRun);
    expect(r).toEqual({ state: 'active', context: ctx(true, 'running'), emitted: [], changed: false, accepted: true });
  });

  it('active + missing heartbeat records lastProcess, no event yet', () => {
    const r = advanceRunner('active', ctx(true, 'running'), hbMiss);
    expect(r).toEqual({ state: 'active', context: ctx(true, 'missing'), emitted: [], changed: true, accepted: true });
  });

  it('active + check with a running heartbeat since last check -> stays active, resets', () => {
    const r = advanceRunner('active', ctx(true, 'running'), check);
    expect(r).toEqual({ state: 'active', context: ctx(false, 'running'), emitted: [], changed: true, accepted: true });
  });

  it('active + check with no heartbeat since last check -> offline, unhealthy (no heartbeat)', () => {
    const r = advanceRunner('active', ctx(false, 'running'), check);
    expect(r.state).toBe('offline');
    expect(r.emitted).toEqual([{ type: 'unhealthy', reason: RUNNER_REASON_NO_HEARTBEAT }]);
    expect(RUNNER_REASON_NO_HEARTBEAT).toBe('no heartbeat since the last health check');
  });

  it('active + check after a missing heartbeat -> offline, unhealthy (process missing), even with an earlier running one', () => {
    const r = advanceRunner('active', ctx(true, 'missing'), check);
    expect(r.state).toBe('offline');
    expect(r.emitted).toEqual([{ type: 'unhealthy', reason: RUNNER_REASON_PROCESS_MISSING }]);
    expect(RUNNER_REASON_PROCESS_MISSING).toBe('runner process missing');
  });

  it('offline + check -> nothing', () => {
    const r = advanceRunner('offline', ctx(false, 'running'), check);
    expect(r).toEqual({ state: 'offline', context: ctx(false, 'running'), emitted: [], changed: false, accepted: false });
  });

  it('offline + missing heartbeat -> stays offline, no event', () => {
    const r = advanceRunner('offline', ctx(false, 'running'), hbMiss);
    expect(r.state).toBe('offline');
    expect(r.emitted).toEqual([]);
    expect(r.context.lastProcess).toBe('missing');
  });

  it('offline + running heartbeat -> active, no event', () => {
    const r = advanceRunner('offline', ctx(false, 'missing'), hbRun);
    expect(r).toEqual({ state: 'active', context: ctx(true, 'running'), emitted: [], changed: true, accepted: true });
  });

  it('outage sequence: one event per outage, a new outage emits again', () => {
    let s = initialRunner();
    const log: Array<{ state: RunnerStatus; emitted: unknown[]; changed: boolean }> = [];
    const feed = (e: RunnerEvent) => {
      const r = advanceRunner(s.state, s.context, e);
      log.push({ state: r.state, emitted: r.emitted, changed: r.changed });
      s = { state: r.state, context: r.context };
    };
    feed(check); // pending: nothing
    feed(hbRun); // -> active
    feed(check); // heartbeat since activation: stays active, resets
    feed(check); // no heartbeat since the last check: offline, emits
    feed(check); // still offline: nothing
    feed(check); // nothing
    feed(hbRun); // recovery: active, no event
    feed(check); // heartbeat since recovery: stays active
    feed(check); // no heartbeat: offline, emits again
    feed(hbRun); // recovery
    feed(hbMiss); // process missing
    feed(check); // offline again (process missing)
    expect(log.map((l) => l.state)).toEqual([
      'pending',
      'active',
      'active',
      'offline',
      'offline',
      'offline',
      'active',
      'active',
      'offline',
      'active',
      'active',
      'offline',
    ]);
    expect(log.map((l) => l.changed)).toEqual([false, true, true, true, false, false, true, true, true, true, true, true]);
    const emitted = log.flatMap((l) => l.emitted);
    expect(emitted).toEqual([
      { type: 'unhealthy', reason: RUNNER_REASON_NO_HEARTBEAT },
      { type: 'unhealthy', reason: RUNNER_REASON_NO_HEARTBEAT },
      { type: 'unhealthy', reason: RUNNER_REASON_PROCESS_MISSING },
    ]);
  });
});

// ---------------------------------------------------------------------------
describe('component health machine', () => {
  const c = (verdict: ComponentHealthContext['verdict']): ComponentHealthContext => ({ verdict });

  it('ok + degraded -> bad, emits unhealthy with previous and reason', () => {
    const r = advanceComponentHealth('ok', c('healthy'), { type: 'verdict', verdict: 'degraded', reason: 'p99 high' });
    expect(r).toEqual({
      state: 'bad',
      context: c('degraded'),
      emitted: [{ type: 'unhealthy', verdict: 'degraded', previous: 'healthy', reason: 'p99 high' }],
      changed: true,
      accepted: true,
    });
  });

  it('ok + unhealthy from no prior verdict -> bad, previous null, no reason key', () => {
    const r = advanceComponentHealth('ok', c(null), { type: 'verdict', verdict: 'unhealthy' });
    expect(r.state).toBe('bad');
    expect(r.emitted).toEqual([{ type: 'unhealthy', verdict: 'unhealthy', previous: null }]);
    expect('reason' in r.emitted[0]).toBe(false);
  });

  it('bad + healthy -> ok, emits recovered', () => {
    const r = advanceComponentHealth('bad', c('unhealthy'), { type: 'verdict', verdict: 'healthy', reason: 'back' });
    expect(r).toEqual({
      state: 'ok',
      context: c('healthy'),
      emitted: [{ type: 'recovered', verdict: 'healthy', previous: 'unhealthy', reason: 'back' }],
      changed: true,
      accepted: true,
    });
  });

  it('degraded -> unhealthy is silent (context updated)', () => {
    const r = advanceComponentHealth('bad', c('degraded'), { type: 'verdict', verdict: 'unhealthy' });
    expect(r).toEqual({ state: 'bad', context: c('unhealthy'), emitted: [], changed: true, accepted: true });
  });

  it('unhealthy -> degraded is silent', () => {
    const r = advanceComponentHealth('bad', c('unhealthy'), { type: 'verdict', verdict: 'degraded' });
    expect(r).toEqual({ state: 'bad', context: c('degraded'), emitted: [], changed: true, accepted: true });
  });

  it('ok + healthy records the first verdict silently; a repeat changes nothing', () => {
    const r = advanceComponentHealth('ok', c(null), { type: 'verdict', verdict: 'healthy' });
    expect(r).toEqual({ state: 'ok', context: c('healthy'), emitted: [], changed: true, accepted: true });
    const again = advanceComponentHealth('ok', c('healthy'), { type: 'verdict', verdict: 'healthy' });
    expect(again).toEqual({ state: 'ok', context: c('healthy'), emitted: [], changed: false, accepted: true });
  });

  for (const state of ['ok', 'bad'] as HealthStatus[]) {
    it(`${state} + unknown is not accepted and changes nothing`, () => {
      const ctx = c(state === 'ok' ? 'healthy' : 'degraded');
      const r = advanceComponentHealth(state, ctx, { type: 'verdict', verdict: 'unknown', reason: 'probe timeout' });
      expect(r).toEqual({ state, context: ctx, emitted: [], changed: false, accepted: false });
    });
  }

  it('sequence: healthy, unknown, degraded, unhealthy, unknown, healthy, healthy, unhealthy', () => {
    let s = initialComponentHealth();
    const out: unknown[] = [];
    for (const v of ['healthy', 'unknown', 'degraded', 'unhealthy', 'unknown', 'healthy', 'healthy', 'unhealthy'] as const) {
      const r = advanceComponentHealth(s.state, s.context, { type: 'verdict', verdict: v });
      out.push(...r.emitted);
      s = { state: r.state, context: r.context };
    }
    expect(out).toEqual([
      { type: 'unhealthy', verdict: 'degraded', previous: 'healthy' },
      { type: 'recovered', verdict: 'healthy', previous: 'unhealthy' },
      { type: 'unhealthy', verdict: 'unhealthy', previous: 'healthy' },
    ]);
    expect(s).toEqual({ state: 'bad', context: c('unhealthy') });
  });
});

// ---------------------------------------------------------------------------
describe('install health machine', () => {
  const v = (component_id: string, verdict: InstallHealthEvent['verdict']): InstallHealthEvent => ({
    type: 'verdict',
    component_id,
    verdict,
  });

  it('compositeVerdict is the worst last-known verdict', () => {
    expect(compositeVerdict({})).toBeNull();
    expect(compositeVerdict({ a: 'healthy', b: 'healthy' })).toBe('healthy');
    expect(compositeVerdict({ a: 'healthy', b: 'degraded' })).toBe('degraded');
    expect(compositeVerdict({ a: 'unhealthy', b: 'degraded', c: 'healthy' })).toBe('unhealthy');
  });

  it('ok + first component degraded -> bad, emits degraded with previous null', () => {
    const r = advanceInstallHealth('ok', { verdicts: {} }, v('cmp_a', 'degraded'));
    expect(r).toEqual({
      state: 'bad',
      context: { verdicts: { cmp_a: 'degraded' } },
      emitted: [{ type: 'degraded', verdict: 'degraded', previous: null, component_id: 'cmp_a' }],
      changed: true,
      accepted: true,
    });
  });

  it('bad + composite back to healthy -> ok, emits recovered', () => {
    const r = advanceInstallHealth('bad', { verdicts: { a: 'healthy', b: 'unhealthy' } }, v('b', 'healthy'));
    expect(r).toEqual({
      state: 'ok',
      context: { verdicts: { a: 'healthy', b: 'healthy' } },
      emitted: [{ type: 'recovered', verdict: 'healthy', previous: 'unhealthy', component_id: 'b' }],
      changed: true,
      accepted: true,
    });
  });

  it('bad + one component recovers while another is still bad: silent', () => {
    const r = advanceInstallHealth('bad', { verdicts: { a: 'degraded', b: 'unhealthy' } }, v('b', 'healthy'));
    expect(r).toEqual({
      state: 'bad',
      context: { verdicts: { a: 'degraded', b: 'healthy' } },
      emitted: [],
      changed: true,
      accepted: true,
    });
  });

  it('composite degraded -> unhealthy is silent', () => {
    const r = advanceInstallHealth('bad', { verdicts: { a: 'degraded' } }, v('b', 'unhealthy'));
    expect(r.state).toBe('bad');
    expect(r.emitted).toEqual([]);
    expect(r.context).toEqual({ verdicts: { a: 'degraded', b: 'unhealthy' } });
  });

  for (const state of ['ok', 'bad'] as HealthStatus[]) {
    it(`${state} + unknown is not accepted and changes nothing`, () => {
      const ctx: InstallHealthContext = { verdicts: { a: state === 'ok' ? 'healthy' : 'degraded' } };
      const r = advanceInstallHealth(state, ctx, v('a', 'unknown'));
      expect(r).toEqual({ state, context: ctx, emitted: [], changed: false, accepted: false });
      const other = advanceInstallHealth(state, ctx, v('zzz', 'unknown'));
      expect(other).toEqual({ state, context: ctx, emitted: [], changed: false, accepted: false });
    });
  }

  it('ok + healthy verdicts stay silent', () => {
    const r = advanceInstallHealth('ok', { verdicts: { a: 'healthy' } }, v('b', 'healthy'));
    expect(r).toEqual({ state: 'ok', context: { verdicts: { a: 'healthy', b: 'healthy' } }, emitted: [], changed: true, accepted: true });
  });

  it('composite over several components: one event per crossing', () => {
    let s = initialInstallHealth();
    const out: unknown[] = [];
    const seq: InstallHealthEvent[] = [
      v('a', 'healthy'), // composite healthy (ok, silent)
      v('b', 'healthy'), // healthy
      v('c', 'unknown'), // ignored
      v('b', 'degraded'), // -> degraded: emit degraded (previous healthy)
      v('a', 'unhealthy'), // -> unhealthy: silent
      v('b', 'healthy'), // composite still unhealthy (a): silent
      v('a', 'unknown'), // ignored: a stays unhealthy
      v('a', 'healthy'), // -> healthy: emit recovered (previous unhealthy)
      v('c', 'unhealthy'), // -> unhealthy: emit degraded (previous healthy)
    ];
    const changed: boolean[] = [];
    for (const e of seq) {
      const r = advanceInstallHealth(s.state, s.context, e);
      out.push(...r.emitted);
      changed.push(r.changed);
      s = { state: r.state, context: r.context };
    }
    expect(out).toEqual([
      { type: 'degraded', verdict: 'degraded', previous: 'healthy', component_id: 'b' },
      { type: 'recovered', verdict: 'healthy', previous: 'unhealthy', component_id: 'a' },
      { type: 'degraded', verdict: 'unhealthy', previous: 'healthy', component_id: 'c' },
    ]);
    expect(changed).toEqual([true, true, false, true, true, true, false, true, true]);
    expect(s).toEqual({ state: 'bad', context: { verdicts: { a: 'healthy', b: 'healthy', c: 'unhealthy' } } });
  });
});
