// Producer ingest (src/ingest/ingest.ts, CONTRACT 5.2) over the in-process bus, in front of a real
// engine (test/helpers/engine.ts), without HTTP or delivery: each subject family parsed by its
// schema, {ok: false, error} for what cannot be recorded, the answer only after the commit, one
// group commit for what arrives together, svc_ingest_messages_total by result, and an invalid flood
// logged once per org and reason (then counted every 10 s). Fairness between orgs, over real NATS:
// test/isolation/ingest-flood.test.ts. The same over NATS, end to end: test/system/pipeline.test.ts.
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { Subscription } from '../../src/bus/bus.ts';
import { InvalidError } from '../../src/domain/errors.ts';
import { HOLD_MS, nextGroup } from '../../src/ingest/group-commits.ts';
import { parseIngest, startIngest } from '../../src/ingest/ingest.ts';
import { listComponents } from '../../store/installs.ts';
import { getWorkflow } from '../../store/workflows.ts';
import { EngineWorld, logger } from '../helpers/engine.ts';

type Json = any;

const enc = (v: unknown) => new TextEncoder().encode(typeof v === 'string' ? v : JSON.stringify(v));
const workflow = (id: string) => ({
  kind: 'workflow',
  transition: 'started',
  workflow: { id, type: 'manual_deploy', owner_id: 'inst_x', owner_type: 'installs' },
});

describe('parseIngest', () => {
  it('parses each family by its schema', () => {
    expect(parseIngest('svc.ingest.org_a.jobs.job_1', enc({ status: 'succeeded', plan: { changes: [] } }))).toEqual({
      family: 'jobs',
      orgId: 'org_a',
      id: 'job_1',
      body: { status: 'succeeded', plan: { changes: [] } },
    });
    expect(parseIngest('svc.ingest.org_a.workflows.wfx_1', enc(workflow('wfx_1')))).toMatchObject({
      family: 'workflows',
      id: 'wfx_1',
      body: { kind: 'workflow' },
    });
    expect(parseIngest('svc.ingest.org_a.runners.run_1', enc({ type: 'heartbeat', process: 'running' }))).toMatchObject({
      family: 'runners',
      body: { type: 'heartbeat' },
    });
    expect(parseIngest('svc.ingest.org_a.health.inst_1', enc({ component_id: 'cmp_1', verdict: 'degraded' }))).toMatchObject({
      family: 'health',
      id: 'inst_1',
    });
    // a step's execution type defaults to system
    const step = parseIngest(
      'svc.ingest.org_a.workflows.wfx_1',
      enc({ kind: 'workflow_step', transition: 'started', step: { id: 'st_1', name: 'x', idx: 0 } }),
    );
    expect(step.family === 'workflows' && step.body.step?.execution_type).toBe('system');
  });

  it('refuses an unknown subject, a body that is not JSON, and a body its schema refuses, naming the field', () => {
    const refused = (subject: string, body: unknown) => {
      try {
        parseIngest(subject, enc(body));
      } catch (err) {
        expect(err).toBeInstanceOf(InvalidError);
        return (err as Error).message;
      }
      throw new Error(`accepted: ${subject}`);
    };
    expect(refused('svc.ingest.org_a.builds.b_1', {})).toMatch(/unknown ingest subject/);
    expect(refused('svc.ingest.org_a.jobs', {})).toMatch(/unknown ingest subject/);
    expect(refused('svc.ingest.org_a.jobs.job_1', 'not json')).toBe('message is not JSON');
    expect(refused('svc.ingest.org_a.jobs.job_1', { status: 'done' })).toMatch(/^invalid message: status:/);
    expect(refused('svc.ingest.org_a.runners.run_1', { type: 'heartbeat', process: 'sleeping' })).toMatch(/^invalid message: process:/);
    expect(refused('svc.ingest.org_a.health.inst_1', { verdict: 'healthy' })).toMatch(/^invalid message: component_id:/);
    expect(refused('svc.ingest.org_a.workflows.wfx_1', { kind: 'workflow_step', transition: 'started' })).toMatch(
      /^invalid message: step:/,
    );
    expect(
      refused('svc.ingest.org_a.workflows.wfx_1', {
        kind: 'workflow',
        transition: 'started',
        workflow: { ...workflow('Not An Id').workflow },
      }),
    ).toMatch(/^invalid message: workflow\.id:/);
  });
});

describe('startIngest', () => {
  const open: Array<{ w: EngineWorld; sub: Subscription }> = [];
  afterEach(() => {
    for (const { w, sub } of open.splice(0)) {
      sub.unsubscribe();
      w.close();
    }
  });
  function setup() {
    const w = new EngineWorld();
    const sub = startIngest({ bus: w.bus, logger, metrics: w.metrics, engine: w.engine });
    open.push({ w, sub });
    const request = async (subject: string, body: unknown): Promise<Json> =>
      (await w.bus.request(subject, enc(body), { timeoutMs: 5000 })).json();
    const counted = async () =>
      Object.fromEntries((await w.metrics.ingestMessages.get()).values.map((v) => [v.labels.result, v.value])) as Record<string, number>;
    return { w, O: w.org(), request, counted };
  }

  it('answers {ok: true} once the fact is committed: its event is in the outbox when the answer arrives', async () => {
    const { w, O, request, counted } = setup();
    const r = await request(`svc.ingest.${O}.workflows.wfx_1`, workflow('wfx_1'));
    expect(r).toEqual({ ok: true });
    expect(w.events().map((e) => e.subject)).toEqual([`${O}/workflow/wfx_1/started`]);
    expect(getWorkflow(w.db, 'wfx_1')).toMatchObject({ status: 'started', external: true });
    // the same message again: {ok: true}, counted duplicate, nothing new
    expect(await request(`svc.ingest.${O}.workflows.wfx_1`, workflow('wfx_1'))).toEqual({ ok: true });
    // a step that ended before it started... then started: accepted once, ignored after
    const step = { id: 'st_1', name: 'deploy api', idx: 0 };
    expect(await request(`svc.ingest.${O}.workflows.wfx_1`, { kind: 'workflow_step', transition: 'succeeded', step })).toEqual({
      ok: true,
    });
    expect(await request(`svc.ingest.${O}.workflows.wfx_1`, { kind: 'workflow_step', transition: 'started', step })).toEqual({ ok: true });
    expect(await counted()).toEqual({ accepted: 2, duplicate: 1, ignored: 1, invalid: 0, unclassified: 0 });
    expect(w.events()).toHaveLength(3); // started, and the step's started + succeeded
  });

  it('a fact that can never emit (CONTRACT 10.3): stored, answered {ok: true, warning} naming the known types, counted unclassified', async () => {
    const { w, O, request, counted } = setup();
    const S = `svc.ingest.${O}.workflows.wfx_u`;
    const known =
      'known types: provision, deprovision, reprovision, manual_deploy, deploy_components, app_config_update, teardown_component, ' +
      'reprovision_sandbox, deprovision_sandbox, input_update, sync_secrets, action_workflow_run, provision_runner, ' +
      'reprovision_runner, app_branch_run, app_rollback';
    const warned = { ok: true, warning: `unknown workflow type deploy; ${known}` };
    const wf = {
      kind: 'workflow',
      transition: 'started',
      workflow: { id: 'wfx_u', type: 'deploy', owner_id: 'inst_x', owner_type: 'installs' },
    };
    expect(await request(S, wf)).toEqual(warned);
    expect(getWorkflow(w.db, 'wfx_u')).toMatchObject({ type: 'deploy', status: 'started', external: true }); // stored as before
    expect(await request(S, wf)).toEqual(warned); // a duplicate of it: still told
    // a step whose target type classifies it emits (CONTRACT 6.1): no warning; one with none: the workflow's, nothing
    const deployStep = { id: 'st_1', name: 'deploy api', idx: 0, target_type: 'install_deploys' };
    expect(await request(S, { kind: 'workflow_step', transition: 'started', step: deployStep })).toEqual({ ok: true });
    expect(await request(S, { kind: 'workflow_step', transition: 'started', step: { id: 'st_2', name: 'notify', idx: 1 } })).toEqual(
      warned,
    );
    // the workflow's end: still of a type svc does not classify (its type is the stored one)
    expect(await request(S, { kind: 'workflow', transition: 'succeeded' })).toEqual(warned);
    // a drift scan is a known type whose lifecycle is never delivered by design: no warning
    const drift = {
      kind: 'workflow',
      transition: 'started',
      workflow: { id: 'wfx_d', type: 'drift_run', owner_id: 'inst_x', owner_type: 'installs' },
    };
    expect(await request(`svc.ingest.${O}.workflows.wfx_d`, drift)).toEqual({ ok: true });
    expect(await counted()).toEqual({ accepted: 2, duplicate: 0, ignored: 0, invalid: 0, unclassified: 4 });
    expect(w.events().map((e) => e.subject)).toEqual([`${O}/workflow_step/wfx_u/st_1/started`]);
  });

  it('answers {ok: false, error} for what cannot be recorded, records nothing, and counts it invalid', async () => {
    const { w, O, request, counted } = setup();
    const install = w.install(O, w.config(O));
    const [api] = listComponents(w.db, install.install_id);
    const before = w.events().length;
    const cases: Array<[string, unknown, RegExp]> = [
      [`svc.ingest.${O}.jobs.job_1`, 'not json', /not JSON/],
      [`svc.ingest.${O}.jobs.job_1`, { status: 'done' }, /status/],
      [`svc.ingest.${O}.jobs.job_unknown`, { status: 'started' }, /job/],
      [`svc.ingest.org_unknown.workflows.wfx_2`, workflow('wfx_2'), /unknown org/],
      [`svc.ingest.${O}.workflows.wfx_2`, workflow('wfx_3'), /does not match/],
      [`svc.ingest.${O}.workflows.wfx_2`, { kind: 'workflow', transition: 'started' }, /first message/],
      [`svc.ingest.${O}.runners.run_unknown`, { type: 'heartbeat', process: 'running' }, /runner/],
      [`svc.ingest.${O}.health.${install.install_id}`, { component_id: 'cmp_unknown', verdict: 'degraded' }, /component/],
      [`svc.ingest.${O}.health.inst_unknown`, { component_id: api.component_id, verdict: 'degraded' }, /install/],
    ];
    for (const [subject, body, why] of cases) {
      const r = await request(subject, body);
      expect(Object.keys(r).sort(), subject).toEqual(['error', 'ok']);
      expect(r.ok, subject).toBe(false);
      expect(r.error, subject).toMatch(why);
    }
    expect(getWorkflow(w.db, 'wfx_2')).toBeUndefined();
    expect(w.events()).toHaveLength(before);
    expect((await counted()).invalid).toBe(cases.length);
  });

  it('commits what arrives together in one transaction (group commit) and answers each producer', async () => {
    const { w, O, request } = setup();
    const kicks = w.outboxKicks;
    const ids = Array.from({ length: 40 }, (_, i) => `wfx_g${i}`);
    // all sent at once, plus one bad message among them
    const replies = await Promise.all([
      ...ids.map((id) => request(`svc.ingest.${O}.workflows.${id}`, workflow(id))),
      request(`svc.ingest.${O}.jobs.job_unknown`, { status: 'started' }),
    ]);
    expect(replies.slice(0, ids.length)).toEqual(ids.map(() => ({ ok: true })));
    expect(replies.at(-1)).toMatchObject({ ok: false });
    expect(
      w
        .events()
        .map((e) => e.subject)
        .sort(),
    ).toEqual(ids.map((id) => `${O}/workflow/${id}/started`).sort());
    expect(w.outboxKicks - kicks).toBe(1); // one commit wrote them all
  });

  it("commits an org's few messages beside another's backlog in a short group, at most every other group", async () => {
    const { w, request } = setup();
    const [A, B, C] = [w.org(), w.org(), w.org()];
    const name = new Map([
      [A, 'A'],
      [B, 'B'],
      [C, 'C'],
    ]);
    // the orgs of each group commit, in order
    const groups: string[][] = [];
    const ingest = w.engine.ingest.bind(w.engine);
    w.engine.ingest = (facts) => (groups.push(facts.map((f) => name.get(f.orgId)!)), ingest(facts));
    const send = (org: string, id: string) => request(`svc.ingest.${org}.workflows.${id}`, workflow(id));
    // A's backlog, one of B's and four of C's, all waiting before the first group
    const replies = await Promise.all([
      ...Array.from({ length: 300 }, (_, i) => send(A, `wfx_a${i}`)),
      send(B, 'wfx_b0'),
      ...Array.from({ length: 4 }, (_, i) => send(C, `wfx_c${i}`)),
    ]);
    expect(replies).toEqual(replies.map(() => ({ ok: true })));
    const count = (g: string[], org: string) => g.filter((o) => o === org).length;
    // a short group first (turns of each org, 8 messages): B's one, and some of C's
    expect(groups[0]).toHaveLength(8);
    expect(count(groups[0], 'B')).toBe(1);
    expect(count(groups[0], 'C')).toBeLessThan(4);
    // C still has a few waiting beside A's backlog, but two short groups never follow each other
    expect(groups[1].length).toBeGreaterThan(8);
    expect(count(groups[0], 'C') + count(groups[1], 'C')).toBe(4);
    expect(groups.flat()).toHaveLength(305);
  });

  it('makes no short groups when every waiting org has a backlog, and never two short groups in a row', () => {
    const q = { budgetMs: 10, msPerItem: 0.1, lastShort: false };
    // two orgs, 150 each waiting: a full group (the budget's 100 messages)
    expect(nextGroup({ ...q, keys: 2, fewest: 150, size: 300 })).toEqual({ limit: 100, short: false });
    // one of them down to 3 beside the other's backlog: one turn of each org, at least 8
    expect(nextGroup({ ...q, keys: 2, fewest: 3, size: 153 })).toEqual({ limit: 8, short: true });
    // ...but not right after a short group
    expect(nextGroup({ ...q, lastShort: true, keys: 2, fewest: 3, size: 153 })).toEqual({ limit: 100, short: false });
    // one org alone, or few messages in all: a plain group
    expect(nextGroup({ ...q, keys: 1, fewest: 3, size: 3 }).short).toBe(false);
    expect(nextGroup({ ...q, keys: 2, fewest: 1, size: 6 }).short).toBe(false);
    // a slow machine: the budget's group shrinks, never under 8 nor over 512
    expect(nextGroup({ ...q, msPerItem: 5, keys: 2, fewest: 150, size: 300 }).limit).toBe(8);
    expect(nextGroup({ ...q, msPerItem: 0.001, keys: 2, fewest: 150, size: 300 }).limit).toBe(512);
  });

  describe('holds the facts of an org whose deliveries queue (HOLD_MS), to commit them together', () => {
    function held(backlogged: Set<string>) {
      const w = new EngineWorld();
      const sub = startIngest({
        bus: w.bus,
        logger,
        metrics: w.metrics,
        engine: w.engine,
        clock: w.clock,
        backlogged: (org) => backlogged.has(org),
      });
      open.push({ w, sub });
      // the facts of each group commit, by workflow id
      const groups: string[][] = [];
      const ingest = w.engine.ingest.bind(w.engine);
      w.engine.ingest = (facts) => (groups.push(facts.map((f) => f.id)), ingest(facts));
      const answered = new Set<string>();
      const send = (org: string, id: string) =>
        void w.bus
          .request(`svc.ingest.${org}.workflows.${id}`, enc(workflow(id)), { timeoutMs: 5000 })
          .then((m) => m.json<Json>().ok && answered.add(id));
      const turns = async (n = 5) => {
        for (let i = 0; i < n; i++) await new Promise<void>((r) => setImmediate(r));
      };
      return { w, sub, groups, answered, send, turns };
    }

    it('a backlogged org: nothing commits until the hold is up, then what came meanwhile commits in one group', async () => {
      const backlogged = new Set<string>();
      const { w, groups, answered, send, turns } = held(backlogged);
      const A = w.org();
      backlogged.add(A);
      send(A, 'wfx_h1');
      await turns();
      send(A, 'wfx_h2');
      send(A, 'wfx_h3');
      await turns();
      expect(groups).toEqual([]);
      expect(answered.size).toBe(0);
      w.clock.advance(HOLD_MS - 1);
      await turns();
      expect(groups).toEqual([]);
      w.clock.advance(1);
      await turns();
      expect(groups).toEqual([['wfx_h1', 'wfx_h2', 'wfx_h3']]);
      expect([...answered].sort()).toEqual(['wfx_h1', 'wfx_h2', 'wfx_h3']);
      // no longer backlogged: the next fact commits at the next turn, the clock standing still
      backlogged.delete(A);
      send(A, 'wfx_h4');
      await turns();
      expect(groups.at(-1)).toEqual(['wfx_h4']);
      expect(answered.has('wfx_h4')).toBe(true);
    });

    it("another org's fact is not held: it commits at once, and the held facts with it", async () => {
      const backlogged = new Set<string>();
      const { w, groups, answered, send, turns } = held(backlogged);
      const [A, B] = [w.org(), w.org()];
      backlogged.add(A);
      send(A, 'wfx_a1');
      await turns();
      expect(groups).toEqual([]);
      send(B, 'wfx_b1');
      await turns();
      expect(groups.map((g) => [...g].sort())).toEqual([['wfx_a1', 'wfx_b1']]);
      expect(answered.has('wfx_b1') && answered.has('wfx_a1')).toBe(true);
      // the hold's timer was let go: nothing more runs when it would have been up
      w.clock.advance(HOLD_MS);
      await turns();
      expect(groups).toHaveLength(1);
    });

    it('a full enough group is not held, nor are the facts that wait at a drain', async () => {
      const backlogged = new Set<string>();
      const { w, sub, groups, answered, send, turns } = held(backlogged);
      const A = w.org();
      backlogged.add(A);
      const ids = Array.from({ length: 64 }, (_, i) => `wfx_f${i}`);
      for (const id of ids) send(A, id);
      await turns();
      // the 64th fact found 63 waiting: every one committed without the clock moving
      expect(groups.flat().sort()).toEqual([...ids].sort());
      send(A, 'wfx_d1');
      await turns();
      expect(answered.has('wfx_d1')).toBe(false);
      await sub.drain();
      await turns();
      expect(groups.at(-1)).toEqual(['wfx_d1']);
      expect(answered.has('wfx_d1')).toBe(true);
    });

    it('nor are the facts that wait when ingest is unsubscribed: they commit at the next turn', async () => {
      const backlogged = new Set<string>();
      const { w, sub, groups, answered, send, turns } = held(backlogged);
      const A = w.org();
      backlogged.add(A);
      send(A, 'wfx_u1');
      await turns();
      expect(groups).toEqual([]);
      sub.unsubscribe();
      await turns();
      expect(groups).toEqual([['wfx_u1']]);
      expect(answered.has('wfx_u1')).toBe(true);
    });
  });

  it(
    "drains within bounds on its clock: a flush that never completes (NATS down) holds the drain 3 s of the clock's time, " + 'no more',
    async () => {
      const w = new EngineWorld();
      // the in-process bus, but its flush never completes, as with the NATS connection down
      let flushing = false;
      // a class instance: its methods are on the prototype, so the override goes on an object made from it
      const bus = Object.assign(Object.create(w.bus) as typeof w.bus, { flush: () => ((flushing = true), new Promise<void>(() => {})) });
      const sub = startIngest({ bus, logger, metrics: w.metrics, engine: w.engine, clock: w.clock });
      open.push({ w, sub });
      const O = w.org();
      expect(await (await w.bus.request(`svc.ingest.${O}.workflows.wfx_d`, enc(workflow('wfx_d')), { timeoutMs: 5000 })).json()).toEqual({
        ok: true,
      });
      let drained = false;
      const drain = sub.drain().then(() => (drained = true));
      // the drain waits on the flush, bounded by a timer of the injected clock
      while (!flushing) await new Promise<void>((r) => setImmediate(r));
      const timers = w.clock.pending();
      w.clock.advance(2999);
      await new Promise<void>((r) => setImmediate(r));
      expect(drained).toBe(false);
      w.clock.advance(1);
      await drain;
      expect(drained).toBe(true);
      expect(w.clock.pending()).toBe(timers - 1);
    },
  );

  it('writes an invalid flood to the log once per org and reason, then one line per 10 s with the count', async () => {
    const w = new EngineWorld();
    const lines: Array<{ obj: Json; msg: string }> = [];
    const capture = pino(
      { level: 'warn' },
      { write: (line: string) => void lines.push(((j) => ({ obj: j, msg: j.msg }))(JSON.parse(line))) },
    );
    const sub = startIngest({ bus: w.bus, logger: capture, metrics: w.metrics, engine: w.engine, clock: w.clock });
    open.push({ w, sub });
    const O = w.org();
    const replies = await Promise.all(
      Array.from({ length: 300 }, (_, i) =>
        w.bus.request(`svc.ingest.${O}.jobs.job_${i}`, enc('not json'), { timeoutMs: 5000 }).then((m) => m.json<Json>()),
      ),
    );
    expect(replies.every((r) => r.ok === false && r.error === 'message is not JSON')).toBe(true);
    expect(lines.map((l) => [l.obj.org_id, l.obj.error, l.msg])).toEqual([[O, 'message is not JSON', 'ingest message dropped']]);
    w.clock.advance(10_000);
    expect(lines.map((l) => l.msg).slice(1)).toEqual(['ingest message dropped (299 more like this in the last 10 s)']);
    w.clock.advance(30_000);
    expect(lines).toHaveLength(2);
  });
});
