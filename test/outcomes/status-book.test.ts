// What the status book (src/outcomes/status-book.ts) keeps of the orgs a data plane says its
// deliveries queue for (OutcomeBatch.backlogged): ingest holds their facts a moment while it is
// recent (src/ingest/ingest.ts HOLD_MS). A manual clock: nothing here waits on time.
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { openDb, type Db } from '../../store/db.ts';
import { createMetrics } from '../../src/metrics.ts';
import { BACKLOG_HEARD_MS, DeliveryStatusBook } from '../../src/outcomes/status-book.ts';
import type { OutcomeBatch } from '../../src/outcomes/outcome.ts';
import { ManualClock } from '../helpers/clock.ts';

describe('DeliveryStatusBook.backlogged', () => {
  let db: Db | null = null;
  let book: DeliveryStatusBook | null = null;
  afterEach(() => {
    book?.close();
    db?.close();
  });

  it('an org a data plane named is backlogged for BACKLOG_HEARD_MS after its last batch that named it; other orgs never are', () => {
    const clock = new ManualClock();
    db = openDb(':memory:');
    book = new DeliveryStatusBook(db, createMetrics({ defaultMetrics: false }), clock, pino({ level: 'silent' }));
    const batch = (n: number, backlogged?: string[]): OutcomeBatch => ({ id: `w.${n}`, sent_at: clock.now(), worker: 'w', in_flight: 0, dropped: {}, outcomes: [], ...(backlogged ? { backlogged } : {}) });
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
});
