// Embedded mode's delivery thread (src/dataplane/outbox-thread.ts, outbox-thread-entry.ts): over its own
// SQLite connection to a real database file, it delivers committed outbox rows to a real HTTP
// receiver, deletes each once its attempts have outcomes, sends the outcomes back to this thread,
// says truthfully whether it is idle, is started again when it dies (repeating only the attempts
// that were in flight, CONTRACT 6.6), and drains on SIGTERM leaving the rest queued.
import type { Worker } from 'node:worker_threads';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { openDb, type Db } from '../../store/db.ts';
import { DeliveryLedger, insertOutbox, outboxSize, readOutbox } from '../../store/outbox.ts';
import type { OutcomeBatch } from '../../src/outcomes/outcome.ts';
import { encodeRoute, type EventRoute } from '../../src/domain/event-route.ts';
import type { RegistryChange } from '../../src/dataplane/data-plane.ts';
import { OutboxDeliveryThread } from '../../src/dataplane/outbox-thread.ts';
import { spawnThread } from '../../src/dataplane/thread-supervisor.ts';
import { newDbWithOrg, waitFor } from '../helpers/service.ts';
import { startLedgerReceiver, type LedgerReceiver } from '../helpers/ledger.ts';
import { rid } from '../helpers/ids.ts';

const logger = pino({ level: process.env.SVC_TEST_LOG ?? 'silent' });

function hook(orgId: string, url: string, v: number): RegistryChange {
  const webhookId = rid('wh');
  return {
    orgId,
    webhookId,
    v,
    entry: {
      webhook_id: webhookId,
      org_id: orgId,
      url,
      secret: null,
      previous_secret: null,
      previous_secret_expires_at: null,
      interests: { all_events: true },
      match: null,
    },
  };
}

/** Commit `n` events of the org to the outbox, as the engine does (one transaction); their subjects. */
function commit(db: Db, orgId: string, n: number, rev: number): string[] {
  const subjects: string[] = [];
  db.transaction(() => {
    for (let i = 0; i < n; i++) {
      const wf = rid('wf');
      const subject = `${orgId}/workflow/${wf}/started`;
      const id = rid('ev');
      const route: EventRoute = {
        org: orgId,
        type: 'com.svc.workflow.started.v1',
        resource: 'workflow',
        op: 'started',
        event: 'lifecycle.started',
        install: null,
        component: null,
        action: null,
        rev,
      };
      insertOutbox(db, {
        event_id: id,
        org_id: orgId,
        subject: `svc.events.${subject.replaceAll('/', '.')}`,
        type: route.type,
        body: JSON.stringify({ id, subject, specversion: '1.0' }),
        route: encodeRoute(route),
      });
      subjects.push(subject);
    }
  })();
  return subjects;
}

describe('embedded delivery thread', () => {
  let rx: LedgerReceiver;
  let db: Db;
  let file: string;
  let orgId: string;
  const threads: OutboxDeliveryThread[] = [];

  beforeAll(async () => {
    rx = await startLedgerReceiver();
  });
  afterAll(async () => {
    await rx.close();
  });
  afterEach(async () => {
    for (const t of threads.splice(0)) await t.drain();
    db?.close();
    rx.delayMs = 0;
  });

  function start(registry: RegistryChange[], opts: { spawned?: (w: Worker) => void } = {}) {
    const batches: OutcomeBatch[] = [];
    const t = new OutboxDeliveryThread({
      config: { db: file, limits: { concurrency: 64, timeoutMs: 5000, allowPrivateTargets: true }, logLevel: 'silent' },
      registry: () => registry,
      outcomes: (b) => batches.push(b),
      logger,
      spawn: (entry, data) => {
        const w = spawnThread(entry, data);
        opts.spawned?.(w);
        return w;
      },
    });
    threads.push(t);
    return { t, batches, outcomes: () => batches.flatMap((b) => b.outcomes) };
  }

  function freshDb(): void {
    const made = newDbWithOrg('local-thread');
    file = made.db;
    orgId = made.org.org_id;
    db = openDb(file);
  }

  it(
    'delivers what was left in the outbox and what is committed after a kick; deletes each row; outcomes come back; idle only ' +
      'when done',
    async () => {
      freshDb();
      const h = hook(orgId, `${rx.url}/a`, 1);
      const left = commit(db, orgId, 20, 1);
      const { t, outcomes } = start([h]);
      await t.start();
      await waitFor(() => rx.distinct('/a') === 20, 10_000, 'the rows left before start');
      rx.delayMs = 300;
      const more = commit(db, orgId, 10, 1);
      t.kick();
      await waitFor(() => rx.inFlight() > 0, 10_000, 'attempts in flight');
      expect(await t.idle(), 'attempts in flight').toBe(false);
      await waitFor(async () => outboxSize(db) === 0 && (await t.idle()), 10_000, 'every row delivered and deleted');
      expect(new Set(rx.deliveries.filter((d) => d.path === '/a').map((d) => d.subject))).toEqual(new Set([...left, ...more]));
      expect(rx.deliveries.filter((d) => d.path === '/a')).toHaveLength(30);
      await waitFor(() => outcomes().length === 30, 5000, 'the outcomes of every attempt');
      expect(outcomes().every((o) => o.ok && o.webhook_id === h.webhookId)).toBe(true);
    },
  );

  it('waits for the registry revision an event names; a changed webhook reaches the thread before events committed after it', async () => {
    freshDb();
    const a = hook(orgId, `${rx.url}/r1`, 1);
    const { t } = start([a]);
    await t.start();
    const b = hook(orgId, `${rx.url}/r2`, 2);
    t.registryChanged(b);
    const subjects = commit(db, orgId, 5, 2);
    t.kick();
    await waitFor(() => rx.distinct('/r1') === 5 && rx.distinct('/r2') === 5, 10_000, 'both webhooks');
    t.registryChanged({ orgId, webhookId: a.webhookId, v: 3, entry: null });
    commit(db, orgId, 3, 3);
    t.kick();
    await waitFor(() => rx.distinct('/r2') === 8 && outboxSize(db) === 0, 10_000, 'the events after the delete');
    expect(rx.distinct('/r1')).toBe(5);
    expect(subjects).toHaveLength(5);
  });

  it('a thread that dies is started again: every row is delivered, repeats only of attempts that were in flight', async () => {
    freshDb();
    const h = hook(orgId, `${rx.url}/d`, 1);
    const spawned: Worker[] = [];
    const { t } = start([h], { spawned: (w) => spawned.push(w) });
    await t.start();
    rx.delayMs = 200;
    const subjects = commit(db, orgId, 60, 1);
    t.kick();
    await waitFor(() => rx.distinct('/d') >= 15, 10_000, 'a part delivered');
    const inFlight = rx.inFlight();
    await spawned[0].terminate(); // as if it crashed: no drain
    await waitFor(() => spawned.length === 2, 10_000, 'a new thread');
    await waitFor(() => outboxSize(db) === 0, 20_000, 'everything delivered by the new thread');
    expect(new Set(rx.deliveries.filter((d) => d.path === '/d').map((d) => d.subject))).toEqual(new Set(subjects));
    const repeats = rx.deliveries.filter((d) => d.path === '/d').length - subjects.length;
    expect(repeats).toBeLessThanOrEqual(Math.max(inFlight, 8));
  });

  it(
    'after a crash: a row the ledger marks delivered is deleted, never sent again; a row with recorded progress goes only to the ' +
      'webhooks it has not had; stale records mean nothing',
    async () => {
      freshDb();
      const h1 = hook(orgId, `${rx.url}/c1`, 1);
      const h2 = hook(orgId, `${rx.url}/c2`, 2);
      const [delivered, halfway, fresh] = commit(db, orgId, 3, 2);
      const rows = readOutbox(db, 0, 10);
      const ledger = new DeliveryLedger(file);
      try {
        // as a killed thread left them: a delivered row not yet deleted, another row's progress, and
        // records of a seq that now holds another event (a row deleted, its seq reused)
        ledger.mark([
          { seq: rows[0].seq, event_id: rows[0].event_id },
          { seq: rows[2].seq, event_id: 'ev_gone' },
        ]);
        ledger.saveProgress([{ seq: rows[1].seq, event_id: rows[1].event_id, done: [h1.webhookId] }]);
      } finally {
        ledger.close();
      }
      const { t } = start([h1, h2]);
      await t.start();
      await waitFor(async () => outboxSize(db) === 0 && (await t.idle()), 10_000, 'the rows left handled');
      const at = (path: string) =>
        rx.deliveries
          .filter((d) => d.path === path)
          .map((d) => d.subject)
          .sort();
      expect(at('/c1')).toEqual([fresh].sort());
      expect(at('/c2')).toEqual([halfway, fresh].sort());
      expect([...at('/c1'), ...at('/c2')]).not.toContain(delivered);
    },
  );

  it('drain: starts nothing new, finishes the attempts in flight, records their progress, leaves the rest in the outbox', async () => {
    freshDb();
    const h1 = hook(orgId, `${rx.url}/s1`, 1);
    const h2 = hook(orgId, `${rx.url}/s2`, 2);
    const { t, outcomes } = start([h1, h2]);
    await t.start();
    rx.delayMs = 250;
    commit(db, orgId, 40, 2);
    t.kick();
    await waitFor(() => rx.inFlight() >= 8, 10_000, 'attempts in flight');
    const seen = rx.deliveries.length;
    const abortedBefore = rx.aborted();
    await t.drain();
    threads.pop();
    expect(rx.aborted() - abortedBefore, 'attempts cut off').toBe(0);
    expect(rx.inFlight()).toBe(0);
    expect(rx.deliveries.length - seen, 'attempts started after the drain began').toBeLessThanOrEqual(16);
    const attempts = rx.deliveries.filter((d) => d.path.startsWith('/s')).length;
    expect(outcomes()).toHaveLength(attempts);
    const left = readOutbox(db, 0, 1000);
    expect(left.length).toBeGreaterThan(0);
    expect(left.length).toBeLessThan(40);
    // every attempt made is either a deleted row or recorded as progress (the thread's ledger) on a row left
    const ledger = new DeliveryLedger(file);
    try {
      const recorded = ledger.load(db);
      expect(recorded.delivered, 'delivered rows are deleted from the outbox at the drain').toEqual([]);
      const progressed = left.reduce((n, r) => n + (recorded.progress.get(r.seq)?.done.length ?? 0), 0);
      expect((40 - left.length) * 2 + progressed).toBe(attempts);
    } finally {
      ledger.close();
    }
  });
});
