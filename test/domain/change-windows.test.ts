import { describe, expect, it } from 'vitest';
import { isTimeZone, startMinutes, wallToInstant, windowVerdict, type ScheduleWindow } from '../../src/domain/change-windows.ts';

const H = 3_600_000;
const win = (w: Partial<ScheduleWindow> & Pick<ScheduleWindow, 'window_id' | 'kind'>): ScheduleWindow => ({
  days: ['sun'],
  start: '02:00',
  duration_ms: 2 * H,
  time_zone: 'America/Los_Angeles',
  ...w,
});
const acme = { install_id: 'ins_a', labels: { tier: 'enterprise' } };
const other = { install_id: 'ins_b', labels: { tier: 'free' } };
const at = (iso: string) => Date.parse(iso);

describe('change window schedule', () => {
  it('Sunday 02:00–04:00 America/Los_Angeles seen from Saturday noon opens Sunday 02:00 PDT', () => {
    const w = win({ window_id: 'cw_sun', kind: 'allow' });
    // Saturday 2026-07-11 12:00 PDT = 19:00Z
    const v = windowVerdict([w], acme, 'branch_run', at('2026-07-11T19:00:00Z'));
    expect(v).toEqual({ may_start: false, next_window_at: '2026-07-12T09:00:00.000Z', window_ids: ['cw_sun'] });
    // inside the window it may start; at 04:00 PDT it is closed again
    expect(windowVerdict([w], acme, 'branch_run', at('2026-07-12T10:59:59Z')).may_start).toBe(true);
    expect(windowVerdict([w], acme, 'branch_run', at('2026-07-12T11:00:00Z')).next_window_at).toBe('2026-07-19T09:00:00.000Z');
  });

  it('a 02:30 window on the spring-forward day (2026-03-08) opens at 03:00 PDT', () => {
    expect(new Date(wallToInstant('America/Los_Angeles', Date.UTC(2026, 2, 8, 2, 30))).toISOString()).toBe('2026-03-08T10:00:00.000Z');
    const w = win({ window_id: 'cw_dst', kind: 'allow', start: '02:30', duration_ms: H });
    const v = windowVerdict([w], acme, 'branch_run', at('2026-03-07T20:00:00Z'));
    expect(v.next_window_at).toBe('2026-03-08T10:00:00.000Z'); // 03:00 PDT
  });

  it('a window in the repeated hour opens at its first occurrence', () => {
    // 2026-11-01 01:30 happens at 08:30Z (PDT) and again at 09:30Z (PST)
    expect(new Date(wallToInstant('America/Los_Angeles', Date.UTC(2026, 10, 1, 1, 30))).toISOString()).toBe('2026-11-01T08:30:00.000Z');
    expect(new Date(wallToInstant('Europe/Berlin', Date.UTC(2026, 6, 1, 12, 0))).toISOString()).toBe('2026-07-01T10:00:00.000Z');
  });

  it('a deny window covering now holds the install until it closes', () => {
    const w = win({ window_id: 'cw_deny', kind: 'deny', days: ['thu'], start: '09:00', duration_ms: 8 * H, time_zone: 'UTC' });
    const v = windowVerdict([w], acme, 'branch_run', at('2026-11-26T10:00:00Z'));
    expect(v).toEqual({ may_start: false, next_window_at: '2026-11-26T17:00:00.000Z', window_ids: ['cw_deny'] });
    expect(windowVerdict([w], acme, 'branch_run', at('2026-11-26T17:00:00Z')).may_start).toBe(true);
    // an allow window opening inside the deny does not let it start before the deny closes
    const allow = win({ window_id: 'cw_allow', kind: 'allow', days: ['thu'], start: '12:00', duration_ms: 8 * H, time_zone: 'UTC' });
    expect(windowVerdict([w, allow], acme, 'branch_run', at('2026-11-26T10:00:00Z')).next_window_at).toBe('2026-11-26T17:00:00.000Z');
  });

  it('allow windows: outside all of them it waits for the earliest', () => {
    const a = win({ window_id: 'cw_1', kind: 'allow', days: ['mon', 'wed'], start: '22:00', duration_ms: H, time_zone: 'Europe/Berlin' });
    const b = win({ window_id: 'cw_2', kind: 'allow', days: ['fri'], start: '06:00', duration_ms: H, time_zone: 'Asia/Tokyo' });
    const v = windowVerdict([a, b], acme, 'branch_run', at('2026-11-26T12:00:00Z')); // Thursday
    expect(v.may_start).toBe(false);
    expect(v.window_ids).toEqual(['cw_1', 'cw_2']);
    expect(v.next_window_at).toBe('2026-11-26T21:00:00.000Z'); // Friday 06:00 JST
  });

  it('a label selector and install ids pick the installs a window holds', () => {
    const byLabel = win({
      window_id: 'cw_l',
      kind: 'deny',
      days: [...(['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'] as const)],
      start: '00:00',
      duration_ms: 24 * H,
      time_zone: 'UTC',
      selector: { match_labels: { tier: 'enterprise' } },
    });
    expect(windowVerdict([byLabel], acme, 'branch_run', at('2026-11-26T12:00:00Z')).may_start).toBe(false);
    expect(windowVerdict([byLabel], other, 'branch_run', at('2026-11-26T12:00:00Z')).may_start).toBe(true);
    const byId = { ...byLabel, selector: null, install_ids: ['ins_b'] };
    expect(windowVerdict([byId], acme, 'branch_run', at('2026-11-26T12:00:00Z')).may_start).toBe(true);
    expect(windowVerdict([byId], other, 'branch_run', at('2026-11-26T12:00:00Z')).window_ids).toEqual(['cw_l']);
  });

  it('rollbacks pass a window unless applies_to names them', () => {
    const w = win({ window_id: 'cw_d', kind: 'deny', days: ['thu'], start: '00:00', duration_ms: 24 * H, time_zone: 'UTC' });
    const now = at('2026-11-26T12:00:00Z');
    expect(windowVerdict([w], acme, 'rollback', now).may_start).toBe(true);
    expect(windowVerdict([{ ...w, applies_to: ['rollback'] }], acme, 'rollback', now).may_start).toBe(false);
    expect(windowVerdict([{ ...w, applies_to: ['rollback'] }], acme, 'branch_run', now).may_start).toBe(true);
  });

  it('checks time zones and start times', () => {
    expect(isTimeZone('America/Los_Angeles')).toBe(true);
    expect(isTimeZone('Mars/Olympus')).toBe(false);
    expect(startMinutes('02:30')).toBe(150);
    expect(startMinutes('24:00')).toBeNull();
    expect(startMinutes('2:30')).toBeNull();
  });
});
