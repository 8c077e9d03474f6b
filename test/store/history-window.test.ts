// store/history.ts listEvents and recoveryCandidates: an org's events in a window of time are read
// by seq between bounds found by bisection on their times (eventSeqsBetween), with no index on
// (org, time); what is read is exactly the window's events, whatever the cursor, and a clock stepped
// back by less than CLOCK_STEP_SLACK_MS loses none.
import { describe, expect, it } from 'vitest';
import type { Db } from '../../store/db.ts';
import { CLOCK_STEP_SLACK_MS, insertEvent, insertRecovery, listEvents, recoveryById, recoveryCandidates } from '../../store/history.ts';
import { tempStores } from '../helpers/store.ts';

const stores = tempStores('svc-window-');
const store = (): Db => stores.open();

const MIN = 60_000;
const event = (n: number, org: string, ms: number) => ({
  event_id: `ev_${n}`,
  org_id: org,
  type: 't',
  subject: 's',
  body: '{}',
  route: '{}',
  created_ms: ms,
});
const ids = (rows: Array<{ event_id: string }>) => rows.map((r) => r.event_id);
const query = (orgId: string, sinceMs: number, untilMs: number | null, afterSeq = 0, limit = 1000) => ({
  orgId,
  sinceMs,
  untilMs,
  type: null,
  subjectPrefix: null,
  afterSeq,
  limit,
});

describe('an org’s events in a window of time', () => {
  it('listEvents reads exactly the window, page by page, over hours of two orgs’ events; the plan walks (org_id, seq)', () => {
    const d = store();
    // one event a minute for 10 hours, orgs alternating, times repeated in pairs
    const times: Array<{ id: string; org: string; ms: number }> = [];
    for (let i = 0; i < 1200; i++) {
      const e = { id: `ev_${i}`, org: i % 2 ? 'org_b' : 'org_a', ms: Math.floor(i / 2) * MIN };
      times.push(e);
      insertEvent(d, event(i, e.org, e.ms));
    }
    for (const [since, until] of [
      [0, null],
      [3 * 60 * MIN, null],
      [3 * 60 * MIN + 1, 4 * 60 * MIN],
      [9 * 60 * MIN, 9 * 60 * MIN],
      [20 * 60 * MIN, null],
      [-5 * MIN, 2 * MIN],
    ] as Array<[number, number | null]>) {
      const want = times.filter((e) => e.org === 'org_a' && e.ms >= since && (until === null || e.ms < until)).map((e) => e.id);
      const got: string[] = [];
      let after = 0;
      for (;;) {
        const page = listEvents(d, query('org_a', since, until, after, 50));
        got.push(...ids(page));
        if (page.length < 50) break;
        after = page[page.length - 1].seq;
      }
      expect(got, `since ${since} until ${until}`).toEqual(want);
    }
    const indexes = (
      d.prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'events'").all() as Array<{ name: string }>
    ).map((r) => r.name);
    expect(indexes).not.toContain('events_org_time');
    const plan = (
      d
        .prepare(
          'EXPLAIN QUERY PLAN SELECT * FROM events WHERE org_id = ? AND seq > ? AND seq <= ? AND created_ms >= ? ORDER BY seq LIMIT ?',
        )
        .all('org_a', 0, 10, 0, 5) as Array<{ detail: string }>
    )
      .map((r) => r.detail)
      .join(' | ');
    expect(plan).toContain('events_org');
    expect(plan).not.toContain('TEMP B-TREE');
  });

  it(
    'newest first (the dashboard’s order): page by page below a cursor, exactly the window reversed; the plan walks (org_id, seq) ' +
      'backwards',
    () => {
      const d = store();
      const times: Array<{ id: string; org: string; ms: number }> = [];
      for (let i = 0; i < 600; i++) {
        const e = { id: `ev_${i}`, org: i % 2 ? 'org_b' : 'org_a', ms: Math.floor(i / 2) * MIN };
        times.push(e);
        insertEvent(d, event(i, e.org, e.ms));
      }
      for (const [since, until] of [
        [0, null],
        [60 * MIN + 1, 2 * 60 * MIN],
        [4 * 60 * MIN, 4 * 60 * MIN],
        [-5 * MIN, 2 * MIN],
      ] as Array<[number, number | null]>) {
        const want = times
          .filter((e) => e.org === 'org_a' && e.ms >= since && (until === null || e.ms < until))
          .map((e) => e.id)
          .reverse();
        const got: string[] = [];
        let below = 0;
        for (;;) {
          const page = listEvents(d, { ...query('org_a', since, until, below, 40), newestFirst: true });
          got.push(...ids(page));
          if (page.length < 40) break;
          below = page[page.length - 1].seq;
        }
        expect(got, `since ${since} until ${until}`).toEqual(want);
      }
      const plan = (
        d
          .prepare(
            'EXPLAIN QUERY PLAN SELECT * FROM events ' +
              'WHERE org_id = ? AND seq > ? AND seq <= ? AND created_ms >= ? ORDER BY seq DESC LIMIT ?',
          )
          .all('org_a', 0, 10, 0, 5) as Array<{ detail: string }>
      )
        .map((r) => r.detail)
        .join(' | ');
      expect(plan).toContain('events_org');
      expect(plan).not.toContain('TEMP B-TREE');
    },
  );

  it('a clock stepped back by less than the slack loses no event of the window; the recovery’s scan finds the same', () => {
    const d = store();
    const T = 1_000 * MIN;
    // 0..4 at T..T+4 min; then the clock steps back 5 minutes: 5..9 at T-1..T+3 min; then on
    const when = [0, 1, 2, 3, 4, -1, 0, 1, 2, 3, 4, 5, 6].map((m) => T + m * MIN);
    expect(5 * MIN).toBeLessThan(CLOCK_STEP_SLACK_MS);
    when.forEach((ms, i) => insertEvent(d, event(i, 'org_a', ms)));
    const since = T + 2 * MIN;
    const until = T + 4 * MIN;
    const want = when
      .map((ms, i) => ({ ms, id: `ev_${i}` }))
      .filter((e) => e.ms >= since && e.ms < until)
      .map((e) => e.id);
    expect(want).toEqual(['ev_2', 'ev_3', 'ev_8', 'ev_9']);
    expect(ids(listEvents(d, query('org_a', since, until)))).toEqual(want);
    insertRecovery(d, {
      recovery_id: 'rec_1',
      org_id: 'org_a',
      webhook_id: 'wh_1',
      created_ms: T + 10 * MIN,
      since_ms: since,
      until_ms: until,
      only_failed: 0,
      backfill: 1,
      from_seq: 0,
      to_seq: when.length,
      rev: 0,
      subscription: '{}',
    } as Parameters<typeof insertRecovery>[1]);
    expect(ids(recoveryCandidates(d, recoveryById(d, 'rec_1')!, 100))).toEqual(want);
  });
});
