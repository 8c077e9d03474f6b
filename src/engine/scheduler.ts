// The engine's timers, on the injected clock: the runner health check (CONTRACT 5.1), sending
// jobs again that were not started (5.2), health gates' bakes (4.3), and scheduled drift scans
// (1 --drift-interval).
import type { Logger } from 'pino';
import type { Clock, Timer } from '../domain/clock.ts';
import type { Engine } from './engine.ts';

/** How often the job queue is looked at for jobs to send again. */
const JOB_SWEEP_MS = 1000;
/** How often baking health gates look at the clock (a bake ends at most this late). */
const BAKE_TICK_MS = 1000;

export interface Schedule {
  runnerHealthIntervalMs: number;
  /** null: no scheduled drift scans */
  driftIntervalMs: number | null;
}

export class Scheduler {
  private timers: Timer[] = [];

  constructor(
    private readonly engine: Engine,
    private readonly clock: Clock,
    private readonly logger: Logger,
  ) {}

  start(s: Schedule): void {
    const every = (ms: number, what: string, fn: () => void) => {
      this.timers.push(
        this.clock.setInterval(() => {
          try {
            fn();
          } catch (err) {
            this.logger.error({ err: String(err), task: what }, 'scheduled task failed');
          }
        }, ms),
      );
    };
    every(s.runnerHealthIntervalMs, 'runner health check', () => this.engine.runnerHealthCheck());
    every(JOB_SWEEP_MS, 'job re-send', () => this.engine.kickJobs());
    every(BAKE_TICK_MS, 'health gate bakes', () => this.engine.bakeTick());
    every(BAKE_TICK_MS, 'change window waits', () => this.engine.windowTick());
    every(BAKE_TICK_MS, 'approval expiries', () => this.engine.approvalTick());
    if (s.driftIntervalMs) every(s.driftIntervalMs, 'drift scans', () => this.engine.driftScans());
  }

  stop(): void {
    for (const t of this.timers) t.cancel();
    this.timers = [];
  }
}
