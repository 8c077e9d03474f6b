// The status book (src/outcomes/status-book.ts): what it keeps of the orgs a data plane says its
// deliveries queue for (OutcomeBatch.backlogged, until it says they caught up: ingest holds their
// facts a moment while it is recent, src/ingest/ingest.ts HOLD_MS), and when it writes the attempt
// log. A manual clock: nothing here waits on time.
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { openDb, type Db } from '../../store/db.ts';
import { getDeliveryStatus } from '../../store/delivery-status.ts';
import { createOrg } from '../../store/orgs.ts';
import { insertWebhook } from '../../store/webhooks.ts';
import { createMetrics } from '../../src/metrics.ts';
import { ATTEMPTS_PER_WRITE, BACKLOG_HEARD_MS, DeliveryStatusBook } from '../../src/outcomes/status-book.ts';
import type { DeliveryOutcome, OutcomeBatch } from '../../src/outcomes/outcome.ts';
import { ManualClock } from '../helpers/clock.ts';
import { allEventsEntry } from '../helpers/webhooks.ts';

let db: Db | null = null;
let book: DeliveryStatusBook | null = null;
afterEach(() => {
  book?.close();
  db?.close();
  book = null;
  db = null;
});

describe('DeliveryStatusBook.backlogged', () => {
  it('an org a data plane named is backlogged for BACKLOG_HEARD_MS after its last batch that named it; other orgs never are', () => {
    const clock = new ManualClock();
    db = openDb(':memory:');
    book = new DeliveryStatusBook(db, createMetrics({ defaultMetrics: false }), clock, pino({ level: 'silent' }));
    const batch = (n: number, backlogged?: string[]): OutcomeBatch => ({
      id: `w.${n}`,
      sent_at: clock.now(),
      worker: 'w',
      in_flight: 0,
      dropped: {},
      outcomes: [],
      ...(backlogged ? { backlogged } : {}),
    });
    expect(book.backlogged('org_a')).toBe(false);
    book.apply(batch(1, ['org_a']));
    expect(book.backlogged('org_a')).toBe(true);
    expect(book.backlogged('org_b')).toBe(false);
    clock.advance(BACKLOG_HEARD_MS - 1);
    expect(book.backlogged('org_a')).toBe(true);
    // a batch that does not name it does not end it; the time since the last one that did does
    book.apply(batch(2));
    clock.advance(1);
    expect(book.backlogged('org_a')).toBe(false);
    // named again: backlogged again, from then on
    book.apply(batch(3, ['org_a', 'org_b']));
    clock.advance(BACKLOG_HEARD_MS - 1);
    expect(book.backlogged('org_a')).toBe(true);
    expect(book.backlogged('org_b')).toBe(true);
  });

  it('a batch that says an org caught up ends what that data plane said at once; what another said stands', () => {
    const clock = new ManualClock();
    db = openDb(':memory:');
    book = new DeliveryStatusBook(db, createMetrics({ defaultMetrics: false }), clock, pino({ level: 'silent' }));
    const batch = (worker: string, n: number, o: { backlogged?: string[]; caught_up?: string[] }): OutcomeBatch => ({
      id: `${worker}.${n}`,
      sent_at: clock.now(),
      worker,
      in_flight: 0,
      dropped: {},
      outcomes: [],
      ...o,
    });
    book.apply(batch('w1', 1, { backlogged: ['org_a', 'org_b'] }));
    book.apply(batch('w2', 1, { backlogged: ['org_b'] }));
    clock.advance(1);
    book.apply(batch('w1', 2, { caught_up: ['org_a', 'org_b'] }));
    // the clock has not moved on: only the batch ended org_a's
    expect(book.backlogged('org_a')).toBe(false);
    // w2 still says org_b's deliveries queue there, until its word is old
    expect(book.backlogged('org_b')).toBe(true);
    clock.advance(BACKLOG_HEARD_MS);
    expect(book.backlogged('org_b')).toBe(false);
    // another data plane's caught_up does not end w1's
    book.apply(batch('w1', 3, { backlogged: ['org_a'] }));
    book.apply(batch('w2', 2, { caught_up: ['org_a'] }));
    expect(book.backlogged('org_a')).toBe(true);
  });
});

describe('DeliveryStatusBook, the attempt log', () => {
  const logged = (d: Db) => (d.prepare('SELECT COUNT(*) AS n FROM delivery_attempts').get() as { n: number }).n;
  const outcome = (n: number, at: number): DeliveryOutcome => ({
    webhook_id: `wh_${n % 7}`,
    org_id: 'org_a',
    event_id: `ev_${n}`,
    type: 't',
    ok: true,
    status: 204,
    error: null,
    duration_ms: 1,
    at,
  });
  /** batches of `size` successful outcomes at the clock's time, each outcome a new event */
  const batcher = (clock: ManualClock) => {
    let n = 0;
    return (size: number): OutcomeBatch => ({
      id: `w.${n}`,
      sent_at: clock.now(),
      worker: 'w',
      in_flight: 0,
      dropped: {},
      outcomes: Array.from({ length: size }, () => outcome(n++, clock.now())),
    });
  };

  it('is written once a second, and besides as soon as ATTEMPTS_PER_WRITE attempts wait (a saturated second is not one long write)', () => {
    const clock = new ManualClock();
    db = openDb(':memory:');
    book = new DeliveryStatusBook(db, createMetrics({ defaultMetrics: false }), clock, pino({ level: 'silent' }), { engineClock: clock });
    const batch = batcher(clock);
    // below the bound: nothing until the second is over
    book.apply(batch(ATTEMPTS_PER_WRITE - 1));
    expect(logged(db)).toBe(0);
    clock.advance(999);
    expect(logged(db)).toBe(0);
    clock.advance(1);
    expect(logged(db)).toBe(ATTEMPTS_PER_WRITE - 1);
    // at the bound, within the batch that reaches it
    book.apply(batch(ATTEMPTS_PER_WRITE - 10));
    expect(logged(db)).toBe(ATTEMPTS_PER_WRITE - 1);
    book.apply(batch(10));
    expect(logged(db)).toBe(2 * ATTEMPTS_PER_WRITE - 1);
    book.apply(batch(5));
    clock.advance(1000);
    expect(logged(db)).toBe(2 * ATTEMPTS_PER_WRITE + 4);
  });

  it('after a failed write, waits for the timer to try again (not a try per batch), and loses nothing it kept', () => {
    const clock = new ManualClock();
    db = openDb(':memory:');
    const warnings: string[] = [];
    const logger = pino({ level: 'warn' }, { write: (line: string) => void warnings.push(line) });
    book = new DeliveryStatusBook(db, createMetrics({ defaultMetrics: false }), clock, logger, { engineClock: clock });
    const batch = batcher(clock);
    db.exec('ALTER TABLE delivery_attempts RENAME TO delivery_attempts_away');
    book.apply(batch(ATTEMPTS_PER_WRITE));
    expect(warnings).toHaveLength(1);
    book.apply(batch(100));
    book.apply(batch(100));
    expect(warnings).toHaveLength(1);
    db.exec('ALTER TABLE delivery_attempts_away RENAME TO delivery_attempts');
    clock.advance(1000);
    expect(logged(db)).toBe(ATTEMPTS_PER_WRITE + 200);
    book.apply(batch(ATTEMPTS_PER_WRITE));
    expect(logged(db)).toBe(2 * ATTEMPTS_PER_WRITE + 200);
  });

  it(
    'says it is written only once every attempt it took and every status it changed is in the store ' + '(what a settled server waits for)',
    () => {
      const clock = new ManualClock();
      db = openDb(':memory:');
      book = new DeliveryStatusBook(db, createMetrics({ defaultMetrics: false }), clock, pino({ level: 'silent' }), { engineClock: clock });
      const batch = batcher(clock);
      expect(book.written()).toBe(true);
      book.apply(batch(3));
      expect(book.written()).toBe(false);
      clock.advance(999);
      expect(book.written()).toBe(false);
      expect(logged(db)).toBe(0);
      clock.advance(1);
      expect(logged(db)).toBe(3);
      expect(book.written()).toBe(true);
      // a write that fails keeps it unwritten until one succeeds
      db.exec('ALTER TABLE delivery_attempts RENAME TO delivery_attempts_away');
      book.apply(batch(1));
      clock.advance(1000);
      expect(book.written()).toBe(false);
      db.exec('ALTER TABLE delivery_attempts_away RENAME TO delivery_attempts');
      clock.advance(1000);
      expect(logged(db)).toBe(4);
      expect(book.written()).toBe(true);
    },
  );
});

describe('DeliveryStatusBook, a webhook status', () => {
  it(
    "last_attempt_at is the newest outcome's end whatever the order they come in, as read, listed and saved; svc_deliveries_total " +
      'counts every outcome of a batch',
    async () => {
      const clock = new ManualClock();
      db = openDb(':memory:');
      const org = createOrg(db, 'a').org.org_id;
      insertWebhook(db, { ...allEventsEntry(org, 'wh_1', 'http://h.example/x'), match_canonical: '' });
      const metrics = createMetrics({ defaultMetrics: false });
      book = new DeliveryStatusBook(db, metrics, clock, pino({ level: 'silent' }));
      const o = (n: number, at: number, ok = true): DeliveryOutcome => ({
        webhook_id: 'wh_1',
        org_id: org,
        event_id: `ev_${n}`,
        type: 't',
        ok,
        status: ok ? 204 : 503,
        error: ok ? null : 'HTTP 503',
        duration_ms: 1,
        at,
      });
      const t0 = Date.parse('2026-12-01T10:00:00.000Z');
      const batch = (id: string, outcomes: DeliveryOutcome[]): OutcomeBatch => ({
        id,
        sent_at: clock.now(),
        worker: 'w',
        in_flight: 0,
        dropped: {},
        outcomes,
      });
      book.apply(batch('w.1', [o(1, t0 + 5), o(2, t0 + 900, false), o(3, t0 + 7)]));
      expect(book.get('wh_1')).toMatchObject({
        last_attempt_at: '2026-12-01T10:00:00.900Z',
        last_outcome: 'failure',
        attempts_total: 3,
        failures_total: 1,
      });
      // an older outcome arriving late moves the totals, not the last attempt
      book.apply(batch('w.2', [o(4, t0 + 100)]));
      expect(book.list(org).get('wh_1')).toMatchObject({ last_attempt_at: '2026-12-01T10:00:00.900Z', attempts_total: 4 });
      book.apply(batch('w.3', [o(5, t0 + 61_000), o(6, t0 + 1_500)]));
      book.flush();
      expect(getDeliveryStatus(db, 'wh_1')).toMatchObject({
        last_attempt_at: '2026-12-01T10:01:01.000Z',
        last_outcome: 'success',
        attempts_total: 6,
        failures_total: 1,
      });
      const counted = (await metrics.registry.getSingleMetric('svc_deliveries_total')!.get()).values;
      expect(Object.fromEntries(counted.map((v) => [v.labels.outcome, v.value]))).toEqual({ success: 5, failure: 1 });
    },
  );
});
