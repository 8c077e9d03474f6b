// The event history as NATS mode's queue (migration 17, src/handoff/relay-queues.ts): queued rows
// after the relay's cursor, retention that keeps them however old, and embedded mode taking over
// what a NATS-mode run left queued. Real SQLite files; the relay itself is in
// test/handoff/history-relay.test.ts.
import path from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { migrate, type Db } from '../../store/db.ts';
import { MIGRATIONS } from '../../store/migrations.ts';
import { insertEvent, insertQueuedEvent, pruneHistory, readQueuedEvents, relayCursor, saveRelayCursor } from '../../store/history.ts';
import { readOutbox } from '../../store/outbox.ts';
import { historyQueue, moveHistoryQueueToOutbox, passEmbeddedEvents } from '../../src/handoff/relay-queues.ts';
import { outboxEventQueue } from '../../src/topology/embedded.ts';
import { tempStores } from '../helpers/store.ts';
import { tmpDir } from '../helpers/service.ts';

const stores = tempStores('svc-hq-');
const store = (): Db => stores.open();

const event = (n: number, ms = 1000 + n) => ({
  event_id: `ev_${n}`,
  org_id: 'org_1',
  type: 't',
  subject: `org_1/workflow/wf_${n}/started`,
  body: `{"n":${n}}`,
  route: '{}',
  created_ms: ms,
});

describe('the event history as the queue', () => {
  it('migration 17 starts the cursor after every event kept so far: those were queued in the outbox', () => {
    const file = path.join(tmpDir('svc-hq-'), 'svc.db');
    const old = stores.closeAfter(new Database(file));
    for (let v = 0; v < 16; v++) {
      old.exec(MIGRATIONS[v]);
      old.pragma(`user_version = ${v + 1}`);
    }
    for (let i = 1; i <= 3; i++) {
      old
        .prepare('INSERT INTO events (event_id, org_id, type, subject, body, route, created_ms) VALUES (?, ?, ?, ?, ?, ?, ?)')
        .run(`ev_${i}`, 'org_1', 't', 's', '{}', '{}', i);
    }
    migrate(old);
    const db = old as unknown as Db;
    expect(relayCursor(db)).toBe(3);
    expect(readQueuedEvents(db, relayCursor(db), 10)).toEqual([]);
  });

  it('queued rows are read after a cursor, in order, passing over rows not queued; a repeated id is not queued', () => {
    const d = store();
    expect(insertQueuedEvent(d, event(1), 'ev_1')).toBe(1);
    insertEvent(d, event(2)); // not queued here (its outbox row is)
    expect(insertQueuedEvent(d, event(3), 'ev_3')).toBe(3);
    expect(insertQueuedEvent(d, event(4), 'ev_3')).toBe(4);
    expect(insertQueuedEvent(d, event(4), 'ev_9')).toBeNull(); // kept already: the caller queues it in the outbox
    expect(readQueuedEvents(d, 0, 10).map((r) => [r.seq, r.event_id, r.batch])).toEqual([
      [1, 'ev_1', 'ev_1'],
      [3, 'ev_3', 'ev_3'],
      [4, 'ev_4', 'ev_3'],
    ]);
    expect(readQueuedEvents(d, 1, 10).map((r) => r.seq)).toEqual([3, 4]);
    // as the relay reads them: NATS subjects, the batch kept
    expect(historyQueue(d).read(1, 1)).toEqual([
      {
        seq: 3,
        event_id: 'ev_3',
        org_id: 'org_1',
        subject: 'svc.events.org_1.workflow.wf_3.started',
        type: 't',
        body: '{"n":3}',
        route: '{}',
        progress: [],
        batch: 'ev_3',
      },
    ]);
    // the cursor moves on, never back
    historyQueue(d).stored([{ first: 3, last: 4, batch: 'ev_3' }]);
    expect(relayCursor(d)).toBe(4);
    saveRelayCursor(d, 1);
    expect(relayCursor(d)).toBe(4);
    expect(historyQueue(d).storedAtStart()).toBe(4);
  });

  it('retention keeps queued rows the relay has not seen stored, however old', () => {
    const d = store();
    for (let i = 1; i <= 6; i++) insertQueuedEvent(d, event(i, i * 10), `ev_${i}`);
    // everything is past the cut-off; rows from seq 4 on are not stored yet
    pruneHistory(d, 1000, 4);
    expect(readQueuedEvents(d, 0, 10).map((r) => r.event_id)).toEqual(['ev_4', 'ev_5', 'ev_6']);
    pruneHistory(d, 1000);
    expect(readQueuedEvents(d, 0, 10)).toEqual([]);
  });

  it('embedded mode takes over what a NATS-mode run left queued: into the outbox, the cursor past it and every event kept, once', () => {
    const d = store();
    for (let i = 1; i <= 5; i++) insertQueuedEvent(d, event(i), i <= 2 ? 'ev_1' : 'ev_3');
    saveRelayCursor(d, 2); // JetStream stored the first batch
    insertEvent(d, event(6)); // an embedded-mode event: its outbox row is its queue
    expect(
      moveHistoryQueueToOutbox(
        d,
        outboxEventQueue(d, () => {}),
      ),
    ).toBe(3);
    expect(readOutbox(d, 0, 10).map((r) => [r.event_id, r.subject, r.body, r.batch])).toEqual([
      ['ev_3', 'svc.events.org_1.workflow.wf_3.started', '{"n":3}', null],
      ['ev_4', 'svc.events.org_1.workflow.wf_4.started', '{"n":4}', null],
      ['ev_5', 'svc.events.org_1.workflow.wf_5.started', '{"n":5}', null],
    ]);
    // past the embedded-mode event too: the next start reads nothing before it
    expect(relayCursor(d)).toBe(6);
    expect(
      moveHistoryQueueToOutbox(
        d,
        outboxEventQueue(d, () => {}),
      ),
    ).toBe(0);
    expect(readOutbox(d, 0, 10)).toHaveLength(3);
    // the history keeps every event
    expect((d.prepare('SELECT COUNT(*) AS n FROM events').get() as { n: number }).n).toBe(6);
    // events of the embedded run: its stop moves the cursor past them (a NATS-mode start reads none)
    insertEvent(d, event(7));
    passEmbeddedEvents(d);
    expect(relayCursor(d)).toBe(7);
    expect(historyQueue(d).storedAtStart()).toBe(7);
  });
});
