// Bounded logs (src/log-summary.ts, CONTRACT §8): a repeated warning is written once per source,
// then summed up every 10 s while it keeps coming; on a ManualClock, no sleeps.
import { describe, expect, it } from 'vitest';
import { ManualClock } from './helpers/clock.ts';
import { RepeatedWarnings } from '../src/log-summary.ts';

type Json = any;

function setup(opts: { maxSources?: number } = {}) {
  const clock = new ManualClock();
  const lines: Array<{ obj: Json; msg: string }> = [];
  const log = new RepeatedWarnings({ warn: (obj, msg) => void lines.push({ obj, msg }) }, clock, 'ingest message dropped', opts);
  return { clock, lines, log };
}

describe('RepeatedWarnings', () => {
  it('writes the first warning of a source in full, then counts its repeats', () => {
    const { lines, log } = setup();
    log.warn({ org_id: 'org_a', error: 'message is not JSON' }, { subject: 'svc.ingest.org_a.jobs.job_1' });
    expect(lines).toEqual([
      { obj: { org_id: 'org_a', error: 'message is not JSON', subject: 'svc.ingest.org_a.jobs.job_1' }, msg: 'ingest message dropped' },
    ]);
    for (let i = 0; i < 1000; i++)
      log.warn({ org_id: 'org_a', error: 'message is not JSON' }, { subject: `svc.ingest.org_a.jobs.job_${i}` });
    expect(lines).toHaveLength(1);
    // another source (another org, or another reason) is written in full at once
    log.warn({ org_id: 'org_b', error: 'message is not JSON' });
    log.warn({ org_id: 'org_a', error: 'unknown org' });
    expect(lines.map((l) => l.obj)).toEqual([
      expect.anything(),
      { org_id: 'org_b', error: 'message is not JSON' },
      { org_id: 'org_a', error: 'unknown org' },
    ]);
  });

  it('writes one summary line per source every 10 s while it repeats, and nothing while it is quiet', () => {
    const { clock, lines, log } = setup();
    const a = { org_id: 'org_a', error: 'message is not JSON' };
    const b = { org_id: 'org_b', error: 'unknown org' };
    log.warn(a);
    log.warn(b);
    for (let i = 0; i < 500; i++) log.warn(a);
    for (let i = 0; i < 7; i++) log.warn(b);
    clock.advance(9_999);
    expect(lines).toHaveLength(2);
    clock.advance(1);
    expect(lines.slice(2)).toEqual([
      { obj: { ...a, repeated: 500, window_ms: 10_000 }, msg: 'ingest message dropped (500 more like this in the last 10 s)' },
      { obj: { ...b, repeated: 7, window_ms: 10_000 }, msg: 'ingest message dropped (7 more like this in the last 10 s)' },
    ]);
    // still coming from a only: counted, one line at 20 s, none for b
    for (let i = 0; i < 3; i++) log.warn(a);
    clock.advance(10_000);
    expect(lines.slice(4)).toEqual([
      { obj: { ...a, repeated: 3, window_ms: 10_000 }, msg: 'ingest message dropped (3 more like this in the last 10 s)' },
    ]);
    // quiet for a minute: nothing written
    clock.advance(60_000);
    expect(lines).toHaveLength(5);
    // after a quiet window a source is new again: its next warning is written in full
    log.warn(a, { subject: 'svc.ingest.org_a.jobs.job_9' });
    expect(lines.at(-1)).toEqual({ obj: { ...a, subject: 'svc.ingest.org_a.jobs.job_9' }, msg: 'ingest message dropped' });
  });

  it('holds no timer while quiet', () => {
    const { clock, log } = setup();
    expect(clock.pending()).toBe(0);
    log.warn({ org_id: 'org_a', error: 'x' });
    expect(clock.pending()).toBe(1);
    clock.advance(10_000); // a window without repeats: the source is forgotten and the timer stops
    expect(clock.pending()).toBe(0);
  });

  it('follows at most maxSources sources one by one; the repeats of the others are summed up together', () => {
    const { clock, lines, log } = setup({ maxSources: 3 });
    for (let i = 0; i < 10; i++) log.warn({ org_id: `org_${i}`, error: 'unknown org' });
    expect(lines).toHaveLength(3);
    clock.advance(10_000);
    expect(lines.slice(3)).toEqual([
      { obj: { sources: 'others', repeated: 7, window_ms: 10_000 }, msg: 'ingest message dropped (7 more like this in the last 10 s)' },
    ]);
  });

  it('close() writes what was counted and stops', () => {
    const { clock, lines, log } = setup();
    log.warn({ org_id: 'org_a', error: 'x' });
    log.warn({ org_id: 'org_a', error: 'x' });
    log.close();
    expect(lines.map((l) => l.msg)).toEqual(['ingest message dropped', 'ingest message dropped (1 more like this in the last 10 s)']);
    expect(clock.pending()).toBe(0);
  });
});
