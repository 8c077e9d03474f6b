// store/history.ts, the attempt log's lookups by event (issue 33): an index on the event id alone
// (event ids begin with their time, so a new attempt appends at its end); the lookups of one event's
// attempts, and of the events a webhook got, read that index, never a webhook's whole log.
import { describe, expect, it } from 'vitest';
import type { Db } from '../../store/db.ts';
import { deliveredEventIds, listAttempts, listEventAttempts, saveAttempts, type AttemptRow } from '../../store/history.ts';
import { createOrg } from '../../store/orgs.ts';
import { insertWebhook } from '../../store/webhooks.ts';
import { tempStores } from '../helpers/store.ts';
import { allEventsEntry } from '../helpers/webhooks.ts';

const stores = tempStores('svc-attempt-log-');
const store = (): Db => stores.open();

const attempt = (webhook_id: string, org_id: string, event_id: string, ok: boolean, ms: number): AttemptRow => ({
  webhook_id,
  org_id,
  event_id,
  type: 't',
  attempted_ms: ms,
  ok,
  status_code: ok ? 204 : 500,
  error: ok ? null : 'HTTP 500',
  duration_ms: 1,
  recovery_id: null,
  kept_ms: ms,
});

/** SQLite's plan for a statement: the detail lines, joined. */
const plan = (d: Db, sql: string, ...args: unknown[]) =>
  (d.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...args) as Array<{ detail: string }>).map((r) => r.detail).join(' | ');

describe('the attempt log by event', () => {
  it('indexes attempts by event id alone, not by (webhook, event)', () => {
    const d = store();
    const cols = (name: string) => (d.prepare(`PRAGMA index_info(${name})`).all() as Array<{ name: string }>).map((c) => c.name);
    expect(cols('delivery_attempts_event_id')).toEqual(['event_id']);
    const names = (
      d.prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'delivery_attempts'").all() as Array<{ name: string }>
    ).map((r) => r.name);
    expect(names.sort()).toEqual(['delivery_attempts_event_id', 'delivery_attempts_webhook']);
  });

  it("finds one event's attempts at each of its org's webhooks, and which events a webhook got", () => {
    const d = store();
    const orgA = createOrg(d, 'a').org.org_id;
    const orgB = createOrg(d, 'b').org.org_id;
    const hook = (org: string, id: string) =>
      insertWebhook(d, { ...allEventsEntry(org, id, `http://${id}.test/`), match_canonical: '' }).webhook_id;
    const a1 = hook(orgA, 'wh_a1');
    const a2 = hook(orgA, 'wh_a2');
    const b1 = hook(orgB, 'wh_b1');
    saveAttempts(d, [
      attempt(a1, orgA, 'ev_1', false, 1),
      attempt(a2, orgA, 'ev_1', true, 2),
      attempt(a1, orgA, 'ev_2', true, 3),
      attempt(b1, orgB, 'ev_1', true, 4),
      attempt(a1, orgA, 'ev_1', true, 5), // a resend, later
    ]);
    const ofEvent = listEventAttempts(d, orgA, 'ev_1', 0).map((a) => [a.webhook_id, a.ok, a.attempted_ms]);
    expect(ofEvent).toEqual([
      [a1, 1, 5],
      [a1, 0, 1],
      [a2, 1, 2],
    ]);
    expect(listEventAttempts(d, orgB, 'ev_2', 0)).toEqual([]);
    expect([...deliveredEventIds(d, a1, ['ev_1', 'ev_2', 'ev_3'])].sort()).toEqual(['ev_1', 'ev_2']);
    expect([...deliveredEventIds(d, a2, ['ev_1', 'ev_2'])]).toEqual(['ev_1']);
    expect([...deliveredEventIds(d, b1, ['ev_2'])]).toEqual([]);
    const q = { keptSinceMs: 0, sinceMs: null, untilMs: null, ok: null, beforeSeq: 0, limit: 10 };
    expect(listAttempts(d, { ...q, webhookId: a1, eventId: 'ev_1' }).map((a) => a.attempted_ms)).toEqual([5, 1]);
    expect(listAttempts(d, { ...q, webhookId: a1, eventId: null }).map((a) => a.attempted_ms)).toEqual([5, 3, 1]);
  });

  it('reads the event index for lookups by event, and the webhook index for a webhook’s log', () => {
    const d = store();
    // the statements the store prepares for them, as it runs them (through the connection's prepare)
    const seen: string[] = [];
    const prepare = d.prepare.bind(d);
    (d as unknown as { prepare: (sql: string) => unknown }).prepare = (sql: string) => {
      seen.push(sql);
      return prepare(sql);
    };
    deliveredEventIds(d, 'w', ['e']);
    listEventAttempts(d, 'org_a', 'e', 0);
    listAttempts(d, { webhookId: 'w', keptSinceMs: 0, sinceMs: null, untilMs: null, ok: null, eventId: 'e', beforeSeq: 0, limit: 10 });
    listAttempts(d, { webhookId: 'w', keptSinceMs: 0, sinceMs: null, untilMs: null, ok: null, eventId: null, beforeSeq: 0, limit: 10 });
    (d as unknown as { prepare: unknown }).prepare = prepare;
    expect(seen).toHaveLength(4);
    const args: unknown[][] = [
      ['w', '["e"]'],
      ['e', 'org_a', 'org_a', 0],
      ['w', 0, 'e', 10],
      ['w', 0, 10],
    ];
    const plans = seen.map((sql, i) => plan(d, sql, ...args[i]));
    expect(plans[0]).toContain('USING INDEX delivery_attempts_event_id');
    expect(plans[1]).toContain('USING INDEX delivery_attempts_event_id');
    expect(plans[2]).toContain('USING INDEX delivery_attempts_event_id');
    expect(plans[3]).toContain('USING INDEX delivery_attempts_webhook');
  });
});
