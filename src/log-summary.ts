// Bounded logs under floods (CONTRACT §8): a warning that repeats is written once per source, and
// then, every window (10 s) in which it kept coming, one line says how many more there were.
// A source quiet for a whole window is forgotten: its next warning is written in full again.
// Ingest uses it for invalid messages (per org and reason), the data plane for failed attempts
// (per webhook). Time is the injected clock's.
import type { Clock, Timer } from './domain/clock.ts';

export interface WarnLogger {
  warn(obj: object, msg: string): void;
}

export type Source = Record<string, string | number | null>;

export interface RepeatedWarningsOptions {
  /** how often repeats are summed up */
  windowMs?: number;
  /** sources followed one by one; the repeats of any further source are summed up together */
  maxSources?: number;
}

const OTHERS = '\u0000others';

export class RepeatedWarnings {
  private readonly windowMs: number;
  private readonly maxSources: number;
  /** sources written in this window or the last, with the repeats counted since the last summary */
  private readonly seen = new Map<string, { source: Source; repeats: number }>();
  private timer: Timer | null = null;

  constructor(
    private readonly logger: WarnLogger,
    private readonly clock: Clock,
    private readonly msg: string,
    opts: RepeatedWarningsOptions = {},
  ) {
    this.windowMs = opts.windowMs ?? 10_000;
    this.maxSources = opts.maxSources ?? 1000;
  }

  /** A warning from `source`: written with `details` if the source is new, else only counted. */
  warn(source: Source, details: object = {}): void {
    const key = JSON.stringify(source);
    const known = this.seen.get(key);
    if (known) {
      known.repeats++;
      return;
    }
    if (this.seen.size >= this.maxSources) {
      const others = this.seen.get(OTHERS);
      if (others) others.repeats++;
      else this.seen.set(OTHERS, { source: { sources: 'others' }, repeats: 1 });
      return;
    }
    this.seen.set(key, { source, repeats: 0 });
    this.logger.warn({ ...source, ...details }, this.msg);
    this.timer ??= this.clock.setInterval(() => this.flush(), this.windowMs);
  }

  /** One line per source that repeated since the last summary; sources that did not are forgotten. */
  flush(): void {
    const secs = Math.round(this.windowMs / 1000);
    for (const [key, s] of this.seen) {
      if (s.repeats === 0) {
        this.seen.delete(key);
        continue;
      }
      this.logger.warn(
        { ...s.source, repeated: s.repeats, window_ms: this.windowMs },
        `${this.msg} (${s.repeats} more like this in the last ${secs} s)`,
      );
      if (key === OTHERS) this.seen.delete(key);
      else s.repeats = 0;
    }
    if (this.seen.size === 0) this.stop();
  }

  /** Write what is counted and stop the timer (a later warning starts it again). */
  close(): void {
    this.flush();
    this.stop();
    this.seen.clear();
  }

  private stop(): void {
    this.timer?.cancel();
    this.timer = null;
  }
}
