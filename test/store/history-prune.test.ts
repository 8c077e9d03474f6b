// store/history.ts pruneHistory: the event history and the attempt log are cut by seq, the last row
// before the cut-off found by bisection (their times grow with seq), with no index on their time.
import { describe, expect, it } from 'vitest';
import type { Db } from '../../store/db.ts';
import { insertEvent, pruneHistory, saveAttempts } from '../../store/history.ts';
import { tempStores } from '../helpers/store.ts';

const stores = tempStores('svc-prune-');
const store = (): Db => stores.open();

const event = (n: number, ms: number) => ({
  event_id: `ev_${n}`,
  org_id: 'org_1',
  type: 't',
  subject: 's',
  body: '{}',
  route: '{}',
  created_ms: ms,
});
const attempt = (n: number, ms: number) => ({
  webhook_id: 'wh_1',
  org_id: 'org_1',
  event_id: `ev_${n}`,
  type: 't',
  attempted_ms: ms,
  ok: true,
  status_code: 204,
  error: null,
  duration_ms: 1,
  recovery_id: null,
  kept_ms: ms,
});
const left = (d: Db, table: 'events' | 'delivery_attempts') =>
  (d.prepare(`SELECT event_id FROM ${table} ORDER BY seq`).all() as Array<{ event_id: string }>).map((r) => r.event_id);

describe('pruneHistory', () => {
  it('deletes exactly the rows before the cut-off, for every cut-off, with gaps in seq and times repeated', () => {
    // times 0, 10, 10, 20, 30, … with ev_3 deleted (a gap in seq)
    const times = [0, 10, 10, 20, 30, 40, 40, 40, 50, 60, 70, 80, 90];
    for (const cut of [-1, 0, 5, 10, 11, 20, 40, 41, 85, 90, 91, 1000]) {
      const d = store();
      times.forEach((ms, i) => insertEvent(d, event(i, ms)));
      saveAttempts(
        d,
        times.map((ms, i) => attempt(i, ms)),
      );
      d.prepare("DELETE FROM events WHERE event_id = 'ev_3'").run();
      d.prepare("DELETE FROM delivery_attempts WHERE event_id = 'ev_3'").run();
      const keep = times
        .map((ms, i) => ({ ms, id: `ev_${i}` }))
        .filter((r) => r.id !== 'ev_3' && r.ms >= cut)
        .map((r) => r.id);
      pruneHistory(d, cut);
      expect(left(d, 'events'), `events, cut-off ${cut}`).toEqual(keep);
      expect(left(d, 'delivery_attempts'), `attempts, cut-off ${cut}`).toEqual(keep);
      d.close();
    }
  });

  it('an empty history prunes nothing, and neither log has an index on its time', () => {
    const d = store();
    expect(pruneHistory(d, Date.now())).toBe(0);
    const indexes = (
      d.prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name IN ('events', 'delivery_attempts')").all() as Array<{
        name: string;
      }>
    ).map((r) => r.name);
    expect(indexes).not.toContain('events_time');
    expect(indexes).not.toContain('delivery_attempts_kept');
  });
});
