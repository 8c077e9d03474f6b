// The outcome batch on the wire (src/outcomes/outcome.ts): a recovery id travels as an optional
// 10th field of an outcome's tuple, and the 9-field tuples of data planes from before it still decode.
import { describe, expect, it } from 'vitest';
import { decodeOutcomeBatch, encodeOutcomeBatch, outcomeOf, type DeliveryOutcome } from '../../src/outcomes/outcome.ts';
import { decodeRoute, encodeRoute, type EventRoute } from '../../src/domain/event-route.ts';

const base: DeliveryOutcome = {
  webhook_id: 'wh_1',
  org_id: 'org_1',
  event_id: 'ev_1',
  type: 't',
  ok: false,
  status: 503,
  error: 'HTTP 503',
  duration_ms: 12,
  at: 1000,
};

describe('outcome batches', () => {
  it('round-trip with and without a recovery id; a 9-field tuple (older data plane) decodes', () => {
    const batch = {
      id: 'b_1',
      sent_at: 900,
      worker: 'w',
      in_flight: 2,
      dropped: { forged: 1 },
      outcomes: [base, { ...base, ok: true, status: 200, error: null, recovery_id: 'rcv_1' }],
    };
    expect(decodeOutcomeBatch(encodeOutcomeBatch(batch))).toEqual(batch);
    const wire = JSON.parse(encodeOutcomeBatch(batch));
    expect(wire.o[0]).toHaveLength(9);
    expect(wire.o[1]).toHaveLength(10);
    const old = JSON.stringify({ i: 'b_0', t: 900, w: 'w', f: 0, d: {}, o: [['wh_1', 'org_1', 'ev_1', 't', 1, 200, null, 5, 1000]] });
    expect(decodeOutcomeBatch(old)?.outcomes[0]).toEqual({ ...base, ok: true, status: 200, error: null, duration_ms: 5 });
    const bad = JSON.stringify({ i: 'b_0', t: 900, w: 'w', f: 0, d: {}, o: [['wh_1', 'org_1', 'ev_1', 't', 1, 200, null, 5, 1000, 7]] });
    expect(decodeOutcomeBatch(bad)).toBeNull();
  });

  it('carry the orgs whose deliveries queue at the data plane (`b`) only when there are some; an older batch has none', () => {
    const batch = { id: 'b_2', sent_at: 900, worker: 'w', in_flight: 8, dropped: {}, outcomes: [base], backlogged: ['org_1', 'org_2'] };
    expect(decodeOutcomeBatch(encodeOutcomeBatch(batch))).toEqual(batch);
    const none = { ...batch, backlogged: [] };
    expect('b' in JSON.parse(encodeOutcomeBatch(none))).toBe(false);
    expect(decodeOutcomeBatch(encodeOutcomeBatch(none))?.backlogged).toBeUndefined();
    // only org ids are taken from it
    const odd = JSON.stringify({ i: 'b_3', t: 900, w: 'w', f: 0, d: {}, o: [], b: ['org_1', 7, null] });
    expect(decodeOutcomeBatch(odd)?.backlogged).toEqual(['org_1']);
  });

  it('carry the orgs that no longer queue there (`c`) only when there are some', () => {
    const batch = {
      id: 'b_4',
      sent_at: 900,
      worker: 'w',
      in_flight: 0,
      dropped: {},
      outcomes: [],
      backlogged: ['org_2'],
      caught_up: ['org_1'],
    };
    expect(JSON.parse(encodeOutcomeBatch(batch)).c).toEqual(['org_1']);
    expect(decodeOutcomeBatch(encodeOutcomeBatch(batch))).toEqual(batch);
    const none = { ...batch, caught_up: [] };
    expect('c' in JSON.parse(encodeOutcomeBatch(none))).toBe(false);
    expect(decodeOutcomeBatch(encodeOutcomeBatch(none))?.caught_up).toBeUndefined();
    const odd = JSON.stringify({ i: 'b_5', t: 900, w: 'w', f: 0, d: {}, o: [], c: [3, 'org_3'] });
    expect(decodeOutcomeBatch(odd)?.caught_up).toEqual(['org_3']);
  });
});

describe('outcomeOf', () => {
  const target = { webhook_id: 'wh_1', org_id: 'org_1', event_id: 'ev_1', type: 't' };
  it('turns a failed attempt into a failure outcome with its status and error, no recovery id', () => {
    const o = outcomeOf(target, { delivered: false, status: 503, error: 'HTTP 503', duration_ms: 12 }, 1000);
    expect(o).toEqual(base);
    expect('recovery_id' in o).toBe(false);
  });
  it('a delivered attempt without a status gives null status and error; a recovery or resend keeps its id', () => {
    expect(outcomeOf({ ...target, recovery_id: 'resend' }, { delivered: true, duration_ms: 3 }, 5)).toEqual({
      ...target,
      ok: true,
      status: null,
      error: null,
      duration_ms: 3,
      at: 5,
      recovery_id: 'resend',
    });
    expect('recovery_id' in outcomeOf({ ...target, recovery_id: null }, { delivered: true, duration_ms: 3 }, 5)).toBe(false);
  });
});

describe('routes of recovery items', () => {
  const route: EventRoute = {
    org: 'org_1',
    type: 't',
    resource: 'installs',
    op: 'provision',
    event: 'lifecycle.started',
    install: null,
    component: null,
    action: null,
    rev: 3,
  };
  it('carry the recovery (id, webhook, event id); a malformed one is refused', () => {
    const r = { ...route, recovery: { id: 'rcv_1', webhook: 'wh_1', event_id: 'ev_1' } };
    expect(decodeRoute(encodeRoute(r))).toEqual(r);
    expect(decodeRoute(encodeRoute(route))).toEqual(route);
    expect(decodeRoute(JSON.stringify({ ...route, recovery: { id: 'rcv_1' } }))).toBeNull();
  });
});
