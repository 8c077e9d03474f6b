// One contract for both runtimes' EventQueue (src/handoff/event-queue.ts), the port the engine's
// transaction (src/engine/transaction.ts) queues every emitted event and enqueued item through: the
// same cases run against embedded mode's (src/topology/embedded.ts outboxEventQueue: outbox rows,
// history rows beside them) and NATS mode's (src/handoff/relay-queues.ts relayEventQueue: the
// relays' batches, an event kept queued in its history row), each on a real SQLite file, driven by
// a real Transactions. NATS mode's relays are real too (their batches, their prune), only what they
// are handed after a commit is recorded here instead of published: no network is needed.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import pino from 'pino';
import { openDb, type Db } from '../../store/db.ts';
import { readOutbox, type OutboxRow } from '../../store/outbox.ts';
import { readQueuedEvents } from '../../store/history.ts';
import { Transactions, type Tx } from '../../src/engine/transaction.ts';
import type { WorkflowFact } from '../../src/domain/facts.ts';
import { createMetrics } from '../../src/metrics.ts';
import { OutboxRelay } from '../../src/handoff/outbox-relay.ts';
import { historyQueue, outboxQueue } from '../../src/handoff/relay-queues.ts';
import { relayEventQueue } from '../../src/handoff/relay-event-queue.ts';
import { outboxEventQueue } from '../../src/topology/embedded.ts';
import type { EventQueue, QueueItem } from '../../src/handoff/event-queue.ts';
import { ManualClock } from '../helpers/clock.ts';

/** Stores on files of their own (a new temporary directory each), closed after each test. */
const stores = (() => {
  const opened: Db[] = [];
  afterEach(() => {
    for (const d of opened.splice(0)) if (d.open) d.close();
  });
  return {
    open(): Db {
      const d = openDb(path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'svc-event-queue-')), 'svc.db'));
      opened.push(d);
      return d;
    },
  };
})();
const logger = pino({ level: 'silent' });

/** A runtime's EventQueue over `db`, and every hand-on after a commit (one entry per call, its rows). */
interface Runtime {
  name: string;
  open(db: Db, clock: ManualClock): { queue: EventQueue; handed: OutboxRow[][] };
}

const runtimes: Runtime[] = [
  {
    name: 'embedded',
    open(db) {
      const handed: OutboxRow[][] = [];
      return { queue: outboxEventQueue(db, (rows) => void handed.push([...rows])), handed };
    },
  },
  {
    name: 'NATS',
    open(db, clock) {
      const handed: OutboxRow[][] = [];
      // real relays (their batches, their prune riding in commits), never kicked: nothing is published
      const relay = (queue: typeof outboxQueue) => {
        const real = new OutboxRelay(db, null as never, null as never, logger, null, clock, null, queue(db));
        return {
          assign: (eventId: string, bytes: number) => real.assign(eventId, bytes),
          handoff: (rows: readonly OutboxRow[]) => void handed.push([...rows]),
          piggyback: real.piggyback,
        };
      };
      return { queue: relayEventQueue(db, relay(outboxQueue), relay(historyQueue), () => true), handed };
    },
  },
];

describe.each(runtimes)('the EventQueue contract: $name', (runtime) => {
  function setup(keepEvents = true) {
    const db = stores.open();
    const clock = new ManualClock();
    const { queue, handed } = runtime.open(db, clock);
    const tx = new Transactions({
      db,
      clock,
      metrics: createMetrics({ defaultMetrics: false }),
      urls: () => ({ base: 'http://svc', source: '//svc', dashboard: 'http://svc/dashboard' }),
      registryRev: () => 1,
      queue,
      keepEvents,
      jobsChanged: () => {},
    });
    return { db, tx, handed };
  }

  let n = 0;
  /** An external workflow's `started`: one event. */
  const fact = (): WorkflowFact => ({
    kind: 'workflow',
    transition: 'started',
    org_id: 'org_1',
    time: '2026-01-01T00:00:00.000Z',
    workflow: { id: `wfx_${++n}`, type: 'manual_deploy', owner_id: 'inst_ext', owner_type: 'installs' },
  });
  /** A queue item as a recovery enqueues it. */
  const item = (id: string): QueueItem => ({
    event_id: id,
    org_id: 'org_1',
    subject: `svc.events.org_1.workflow.${id}.started`,
    type: 'svc.workflow.started',
    body: `{"id":"${id}"}`,
    route: '{"org":"org_1"}',
  });
  const ids = (rows: readonly OutboxRow[]) => rows.map((r) => r.event_id);
  /** every event id kept in the history, in seq order */
  const history = (db: Db) =>
    (db.prepare('SELECT event_id FROM events ORDER BY seq').all() as Array<{ event_id: string }>).map((r) => r.event_id);
  /** every row queued, in either table a runtime queues in */
  const queued = (db: Db) => [...ids(readOutbox(db, 0, 100)), ...readQueuedEvents(db, 0, 100).map((e) => e.event_id)].sort();

  it('an emitted event is kept in the history when events are kept, and queued once either way', () => {
    for (const keep of [true, false]) {
      const { db, tx, handed } = setup(keep);
      tx.run((t) => t.emit(fact()));
      const [row] = handed.flat();
      expect(handed.flat()).toHaveLength(1);
      expect(row.type).toBe('com.svc.workflow.lifecycle.v1');
      expect(row.subject.startsWith('svc.events.')).toBe(true);
      expect(queued(db)).toEqual([row.event_id]);
      expect(history(db)).toEqual(keep ? [row.event_id] : []);
    }
  });

  it('an enqueued item is queued, not kept in the history', () => {
    const { db, tx, handed } = setup();
    tx.run((t) => t.enqueue(item('rec_1')));
    expect(handed).toEqual([[expect.objectContaining({ ...item('rec_1'), progress: [] })]]);
    expect(queued(db)).toEqual(['rec_1']);
    expect(history(db)).toEqual([]);
  });

  it('is handed on only after the commit, every row in order, with its seq', () => {
    const { db, tx, handed } = setup();
    const emitted: string[] = [];
    tx.run((t: Tx) => {
      for (let i = 0; i < 3; i++) t.emit(fact());
      t.afterCommit(() => emitted.push(...handed.flat().map((r) => r.event_id)));
      expect(handed).toEqual([]); // inside the transaction: nothing yet
    });
    expect(handed).toHaveLength(1); // one hand-on per commit
    expect(emitted).toEqual(ids(handed[0])); // before the commit's afterCommit callbacks run
    expect(history(db)).toEqual(ids(handed[0])); // in the order emitted
    const seqs = handed[0].map((r) => r.seq);
    expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
    expect(new Set(seqs).size).toBe(3);
  });

  it('seqs increase from one commit to the next', () => {
    const { tx, handed } = setup();
    for (let i = 0; i < 3; i++) tx.run((t) => t.emit(fact()));
    for (let i = 0; i < 3; i++) tx.run((t) => t.enqueue(item(`rec_${i}`)));
    expect(handed).toHaveLength(6);
    const emitted = handed.slice(0, 3).flat();
    const items = handed.slice(3).flat();
    for (const rows of [emitted, items]) for (let i = 1; i < rows.length; i++) expect(rows[i].seq).toBeGreaterThan(rows[i - 1].seq);
  });

  it('nothing is handed on or left queued after a rollback', () => {
    const { db, tx, handed } = setup();
    expect(() =>
      tx.run((t) => {
        t.emit(fact());
        t.enqueue(item('rec_1'));
        throw new Error('the fact fails');
      }),
    ).toThrow('the fact fails');
    expect(handed).toEqual([]);
    expect(queued(db)).toEqual([]);
    expect(history(db)).toEqual([]);
    // and the next commit is whole
    tx.run((t) => t.enqueue(item('rec_2')));
    expect(handed.map(ids)).toEqual([['rec_2']]);
  });

  it("a group commit's failed item leaves nothing; the others are handed on together, in order", () => {
    const { db, tx, handed } = setup();
    const results = tx.batch([1, 2, 3], (t, i) => {
      t.emit(fact());
      t.enqueue(item(`rec_${i}`));
      if (i === 2) throw new Error('item 2 fails');
      return i;
    });
    expect(results.map((r) => r.ok)).toEqual([true, false, true]);
    const rows = handed.flat();
    expect(rows.filter((r) => r.event_id.startsWith('rec_')).map((r) => r.event_id)).toEqual(['rec_1', 'rec_3']);
    const events = rows.filter((r) => !r.event_id.startsWith('rec_'));
    expect(events).toHaveLength(2);
    expect(history(db)).toEqual(ids(events));
    expect(queued(db)).toEqual(ids(rows).sort());
  });
});

describe('NATS mode: what rides in the commit', () => {
  it("the relays' prune is written inside each transaction and told whether it committed or rolled back", () => {
    const db = stores.open();
    const calls: string[] = [];
    const lane = (name: string) => ({
      assign: (eventId: string) => eventId,
      handoff: () => void calls.push(`${name} handed`),
      piggyback: {
        write: () => void calls.push(`${name} write (in a transaction: ${db.inTransaction})`),
        committed: () => void calls.push(`${name} committed`),
        rolledBack: () => void calls.push(`${name} rolled back`),
      },
    });
    const tx = new Transactions({
      db,
      clock: new ManualClock(),
      metrics: createMetrics({ defaultMetrics: false }),
      urls: () => ({ base: 'http://svc', source: '//svc', dashboard: 'http://svc/dashboard' }),
      registryRev: () => 1,
      queue: relayEventQueue(db, lane('outbox'), lane('history'), () => true),
      keepEvents: true,
      jobsChanged: () => {},
    });
    tx.run((t) => t.enqueue({ event_id: 'rec_1', org_id: 'org_1', subject: 'svc.events.x', type: 't', body: '{}', route: '{}' }));
    expect(calls.splice(0)).toEqual([
      'outbox write (in a transaction: true)',
      'history write (in a transaction: true)',
      'outbox committed',
      'history committed',
      'outbox handed',
    ]);
    expect(() =>
      tx.run(() => {
        throw new Error('no');
      }),
    ).toThrow('no');
    expect(calls.splice(0)).toEqual(['outbox rolled back', 'history rolled back']);
  });
});
