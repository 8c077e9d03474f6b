// The sequence of each ordering key (CONTRACT 10.1, store/order-sequences.ts), and the history's
// reads by key (store/history.ts): contiguous from 1 per (org, key), given back by a rollback, and
// read through the (org_id, order_key, sequence) index.
import { describe, expect, it } from 'vitest';
import { openDb } from '../../store/db.ts';
import { insertEvent, listKeyEvents } from '../../store/history.ts';
import { lastOrderSequence, nextOrderSequence } from '../../store/order-sequences.ts';

describe('order sequences', () => {
  it('count from 1 per org and key, and a rolled-back transaction gives its numbers back', () => {
    const db = openDb(':memory:');
    expect(nextOrderSequence(db, 'org_a', 'inst_1')).toBe(1);
    expect(nextOrderSequence(db, 'org_a', 'inst_1')).toBe(2);
    expect(nextOrderSequence(db, 'org_b', 'inst_1')).toBe(1);
    expect(nextOrderSequence(db, 'org_a', 'inst_2')).toBe(1);
    expect(() =>
      db.transaction(() => {
        expect(nextOrderSequence(db, 'org_a', 'inst_1')).toBe(3);
        throw new Error('the fact fails');
      })(),
    ).toThrow('the fact fails');
    expect(lastOrderSequence(db, 'org_a', 'inst_1')).toBe(2);
    expect(nextOrderSequence(db, 'org_a', 'inst_1')).toBe(3);
    expect(lastOrderSequence(db, 'org_a', 'nope')).toBe(0);
  });

  it("a key's kept events are read in sequence order through the index", () => {
    const db = openDb(':memory:');
    const ev = (i: number, key: string, sequence: number) => ({
      event_id: `ev_${i}`,
      org_id: 'org_a',
      type: 't',
      subject: 's',
      body: '{}',
      route: '{}',
      created_ms: 1000 + i,
      order_key: key,
      sequence,
    });
    let i = 0;
    for (let n = 1; n <= 5; n++) {
      insertEvent(db, ev(i++, 'inst_1', n));
      insertEvent(db, ev(i++, 'inst_2', n));
    }
    const q = { orgId: 'org_a', orderKey: 'inst_1', afterSequence: 2, afterSeq: 0, keptSinceMs: 0, limit: 10 };
    expect(listKeyEvents(db, q).map((e) => e.sequence)).toEqual([3, 4, 5]);
    const plan = db
      .prepare(
        'EXPLAIN QUERY PLAN SELECT * FROM events WHERE org_id = ? AND order_key = ? AND sequence > ? AND seq > ? AND created_ms >= ? ' +
          'ORDER BY sequence LIMIT ?',
      )
      .all('org_a', 'inst_1', 2, 0, 0, 10) as Array<{ detail: string }>;
    expect(plan.map((p) => p.detail).join(' | ')).toMatch(/USING INDEX events_order_key/);
  });
});
