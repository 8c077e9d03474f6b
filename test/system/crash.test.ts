// Crash recovery on NATS (CONTRACT 5.2, 6.6): svc runs as a child process (`svc serve --nats`), is
// killed with SIGKILL between commit and delivery, and restarted on the same database. Every fact
// a producer got {ok: true} for must reach the receiver exactly once by logical subject.
//
// The windows "committed, not yet published" and "published, its rows not yet pruned (or the
// history's cursor not moved on)" are hit deterministically through the fault-injection points of
// src/handoff/outbox-relay.ts, which the CLI hooks (src/cli/serve.ts) when
// SVC_FAULT_CRASH_BEFORE_PUBLISH=1 / SVC_FAULT_CRASH_AFTER_PUBLISH=1 is set: the process SIGKILLs
// itself.
import Database from 'better-sqlite3';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findNatsServer, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.ts';
import { startReceiver, type Receiver } from '../helpers/receiver.ts';
import { children, childSettled, spawnService, type ChildService } from '../helpers/child-service.ts';
import { apiClient, newDbWithOrg, waitFor } from '../helpers/service.ts';
import { rid } from '../helpers/ids.ts';
import { ingestRequest } from '../helpers/producer.ts';
import { pause } from '../helpers/wait.ts';

type Child = ChildService;

/** svc on NATS with no local runner, optionally with a crash fault switched on, optionally not delivering. */
const spawnSvc = (natsUrl: string, db: string, opts: { fault?: 'BEFORE' | 'AFTER'; noDeliver?: boolean } = {}): Promise<Child> =>
  spawnService(
    db,
    ['--nats', natsUrl, '--no-local-runner', ...(opts.noDeliver ? ['--no-deliver'] : [])],
    opts.fault ? { [`SVC_FAULT_CRASH_${opts.fault}_PUBLISH`]: '1' } : {},
  );

/**
 * Events committed and not yet stored by JetStream: outbox rows, and events queued in their history
 * row after the relay's cursor (NATS subjects).
 */
function queuedRows(db: string, orgId: string): Array<{ event_id: string; subject: string }> {
  const h = new Database(db, { readonly: true, fileMustExist: true });
  try {
    const outbox = h.prepare('SELECT event_id, subject FROM outbox WHERE org_id = ? ORDER BY seq').all(orgId) as Array<{
      event_id: string;
      subject: string;
    }>;
    const history = h
      .prepare(
        'SELECT event_id, subject FROM events WHERE org_id = ? AND seq > (SELECT events_seq FROM relay_cursor) ' +
          'AND batch IS NOT NULL ORDER BY seq',
      )
      .all(orgId) as Array<{ event_id: string; subject: string }>;
    return [...outbox, ...history.map((r) => ({ event_id: r.event_id, subject: `svc.events.${r.subject.split('/').join('.')}` }))];
  } finally {
    h.close();
  }
}

/** The facts of one external workflow with one step: 4 facts, 4 events. */
function workflowFacts(orgId: string) {
  const workflow = { id: rid('wfx'), type: 'manual_deploy', owner_id: 'inst_ext', owner_type: 'installs' };
  const step = {
    id: 'st_deploy',
    name: 'deploy api',
    idx: 0,
    target_type: 'install_deploys',
    component_id: 'cmp_api',
    execution_type: 'system',
  };
  const W = workflow.id;
  return [
    { body: { kind: 'workflow', transition: 'started', workflow }, subject: `${orgId}/workflow/${W}/started` },
    { body: { kind: 'workflow_step', transition: 'started', step }, subject: `${orgId}/workflow_step/${W}/${step.id}/started` },
    { body: { kind: 'workflow_step', transition: 'succeeded', step }, subject: `${orgId}/workflow_step/${W}/${step.id}/succeeded` },
    { body: { kind: 'workflow', transition: 'succeeded' }, subject: `${orgId}/workflow/${W}/succeeded` },
  ].map((f) => ({ ...f, natsSubject: `svc.ingest.${orgId}.workflows.${W}` }));
}

/** How often each subject was delivered. */
function counts(subjects: string[]): Map<string, number> {
  const m = new Map<string, number>();
  for (const s of subjects) m.set(s, (m.get(s) ?? 0) + 1);
  return m;
}

describe.skipIf(findNatsServer() === null)('crash recovery (NATS, svc as a child process)', () => {
  let nats: NatsServerHandle;
  let nc: NatsConnection;
  let jsm: JetStreamManager;
  let rx: Receiver;

  beforeAll(async () => {
    nats = await startNatsServer();
    nc = await connect({ servers: nats.url, name: 'crash-test-producer' });
    jsm = await jetstreamManager(nc);
    rx = await startReceiver();
  });

  afterAll(async () => {
    for (const c of children) c.kill('SIGKILL');
    await nc?.close();
    await rx?.close();
    await nats?.stop();
  });

  /**
   * A producer that retries until it gets {ok: true} (CONTRACT 5.2: a producer that gets no answer
   * sends again). Returns when the fact was acknowledged, and by which svc generation.
   */
  async function sendReliably(subject: string, body: unknown, generation: () => number): Promise<number> {
    for (let attempt = 0; attempt < 200; attempt++) {
      try {
        const m = await ingestRequest(nc, subject, JSON.stringify(body), { timeout: 1000 });
        const r = m.json<{ ok: boolean; error?: string }>();
        if (r.ok !== true) throw new Error(`refused: ${r.error}`); // invalid is a test bug: fail loudly
        return generation();
      } catch (err) {
        if (String(err).includes('refused:')) throw err;
        await pause(100, "no answer (svc down or restarting): the producer's back-off before it sends the same message again");
      }
    }
    throw new Error(`never acknowledged: ${subject}`);
  }

  it('kill -9 between commit and publish: every acknowledged fact is delivered exactly once after a restart', async () => {
    const { db, org } = newDbWithOrg('crash-test');
    const O = org.org_id;
    let generation = 1;

    const first = await spawnSvc(nats.url, db, { fault: 'BEFORE' });
    const hook = await apiClient(first.url, org).post('/v1/orgs/current/webhooks', { webhook_url: rx.hook(`${O}-a`) });
    expect(hook.status, hook.text).toBe(201);

    // 8 external workflows reported concurrently, each fact in order, each retried until acknowledged
    const workflows = Array.from({ length: 8 }, () => workflowFacts(O));
    const acks: Array<{ subject: string; generation: number }> = [];
    const sending = Promise.all(
      workflows.map(async (facts) => {
        for (const f of facts) acks.push({ subject: f.subject, generation: await sendReliably(f.natsSubject, f.body, () => generation) });
      }),
    );

    // the first commit with events kills the process before anything is published
    const died = await first.exited;
    expect(died.signal, first.output()).toBe('SIGKILL');
    const ackedBeforeCrash = acks.filter((a) => a.generation === 1).map((a) => a.subject);
    expect(ackedBeforeCrash.length).toBeGreaterThan(0); // acknowledged, then the crash
    expect(rx.at(`${O}-a`)).toHaveLength(0); // nothing was published, so nothing delivered
    const rows = queuedRows(db, O);
    expect(rows.length).toBeGreaterThan(0); // committed, not published
    const committed = rows.map((r) =>
      r.subject
        .replace(/^svc\.events\./, '')
        .split('.')
        .join('/'),
    );
    for (const s of ackedBeforeCrash) expect(committed).toContain(s); // every acknowledged fact was committed

    // restart on the same database, without the fault
    generation = 2;
    const second = await spawnSvc(nats.url, db);
    try {
      await sending; // the producers' unanswered messages are answered now (duplicates or new facts)
      const expected = workflows.flat().map((f) => f.subject);
      expect(expected).toHaveLength(32);
      await waitFor(
        () => rx.at(`${O}-a`).length >= expected.length,
        15_000,
        `all ${expected.length} deliveries (have ${rx.at(`${O}-a`).length})`,
      );
      // the outbox pruned (JetStream holds what is published) and the work queue empty (every
      // attempt made and acknowledged): a duplicate cannot arrive after this
      await childSettled(db, { jsm });
      const got = counts(rx.subjects(`${O}-a`));
      expect([...got.keys()].sort()).toEqual([...expected].sort()); // none lost, nothing else
      for (const [s, n] of got) expect(n, s).toBe(1); // none doubled
    } finally {
      second.proc.kill('SIGTERM');
      const bye = await second.exited;
      expect(bye.code, second.output()).toBe(0);
    }
  });

  it(
    'kill -9 after JetStream stored a batch but before its rows were pruned or the cursor moved: published again, delivered once ' +
      '(msg id = event id)',
    async () => {
      const { db, org } = newDbWithOrg('crash-test');
      const O = org.org_id;
      const setup = await spawnSvc(nats.url, db);
      const hook = await apiClient(setup.url, org).post('/v1/orgs/current/webhooks', { webhook_url: rx.hook(`${O}-b`) });
      expect(hook.status, hook.text).toBe(201);
      setup.proc.kill('SIGTERM');
      expect((await setup.exited).code).toBe(0);

      // --no-deliver: this test is about the relay's window between publish and prune. A data plane
      // in the dying process could take stored events in the 100 ms before the kill; unacknowledged,
      // JetStream gives them out again only after the ack wait (60 s), which is another story.
      const first = await spawnSvc(nats.url, db, { fault: 'AFTER', noDeliver: true });
      const facts = [...workflowFacts(O), ...workflowFacts(O)];
      let generation = 1;
      const sending = Promise.all(facts.map((f) => sendReliably(f.natsSubject, f.body, () => generation)));
      const died = await first.exited;
      expect(died.signal, first.output()).toBe('SIGKILL');
      expect(queuedRows(db, O).length).toBeGreaterThan(0); // stored by JetStream, still queued (its rows or the cursor not yet moved on)

      generation = 2;
      const second = await spawnSvc(nats.url, db);
      try {
        await sending;
        const expected = facts.map((f) => f.subject);
        await waitFor(() => rx.at(`${O}-b`).length >= new Set(expected).size, 15_000, 'the deliveries after the restart');
        await childSettled(db, { jsm }); // outbox pruned, work queue empty: a duplicate cannot arrive after this
        const got = counts(rx.subjects(`${O}-b`));
        expect([...got.keys()].sort()).toEqual([...new Set(expected)].sort());
        for (const [s, n] of got) expect(n, s).toBe(1); // the re-publish was dropped as a duplicate
      } finally {
        second.proc.kill('SIGTERM');
        const bye = await second.exited;
        expect(bye.code, second.output()).toBe(0);
      }
    },
  );
});
