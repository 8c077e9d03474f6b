// A clock for tests: time moves only when a test says so (src/domain/clock.ts is the real one).
import type { Clock, Timer } from '../../src/domain/clock.ts';

interface Scheduled {
  at: number;
  every: number | null;
  fn: () => void;
  cancelled: boolean;
  seq: number;
}

/** A clock that moves only when told to: `advance(ms)` runs every timer that falls due, in time order. */
export class ManualClock implements Clock {
  private t: number;
  private seq = 0;
  private timers: Scheduled[] = [];

  constructor(startMs = Date.parse('2026-01-01T00:00:00.000Z')) {
    this.t = startMs;
  }

  now(): number {
    return this.t;
  }

  setTimeout(fn: () => void, ms: number): Timer {
    return this.add(fn, ms, null);
  }

  setInterval(fn: () => void, ms: number): Timer {
    return this.add(fn, ms, Math.max(1, ms));
  }

  /** Timers not yet run or cancelled. */
  pending(): number {
    return this.timers.filter((s) => !s.cancelled).length;
  }

  /** Move time forward by ms, running due timers in order (a timer set by a timer runs too if it falls due). */
  advance(ms: number): void {
    const end = this.t + Math.max(0, ms);
    for (;;) {
      const next = this.timers.filter((s) => !s.cancelled && s.at <= end).sort((a, b) => a.at - b.at || a.seq - b.seq)[0];
      if (!next) break;
      this.t = Math.max(this.t, next.at);
      if (next.every !== null) next.at += next.every;
      else next.cancelled = true;
      next.fn();
      this.timers = this.timers.filter((s) => !s.cancelled);
    }
    this.t = end;
  }

  private add(fn: () => void, ms: number, every: number | null): Timer {
    const s: Scheduled = { at: this.t + Math.max(0, ms), every, fn, cancelled: false, seq: this.seq++ };
    this.timers.push(s);
    return { cancel: () => (s.cancelled = true) };
  }
}
