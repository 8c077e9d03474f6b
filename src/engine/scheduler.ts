// Timers: the runner health check (CONTRACT 5.1), job re-sends, and scheduled drift scans.
import type { AppContext } from '../context.ts';
import type { Engine } from './engine.ts';
import type { Producers } from './producers.ts';
import { listProvisionedInstalls, listComponents } from '../../store/installs.ts';
import { installSteps } from './definitions.ts';

export class Scheduler {
  private timers: NodeJS.Timeout[] = [];

  constructor(
    private readonly ctx: AppContext,
    private readonly producers: Producers,
    private readonly engine: Engine,
  ) {}

  start(): void {
    const every = (ms: number, fn: () => void) => {
      const t = setInterval(() => {
        try {
          fn();
        } catch (err) {
          this.ctx.logger.error({ err: String(err) }, 'scheduled task failed');
        }
      }, ms);
      t.unref();
      this.timers.push(t);
    };
    every(this.ctx.config.runnerHealthIntervalMs, () => this.producers.runnerHealthCheck());
    every(1000, () => this.engine.kickJobs());
    if (this.ctx.config.driftIntervalMs) every(this.ctx.config.driftIntervalMs, () => this.driftScans());
  }

  /** A drift_run and a drift_run_reprovision_sandbox for every provisioned install. */
  driftScans(): void {
    for (const install of listProvisionedInstalls(this.ctx.db)) {
      const components = listComponents(this.ctx.db, install.install_id);
      for (const type of ['drift_run', 'drift_run_reprovision_sandbox'] as const) {
        this.ctx.orchestrator.startWorkflow({
          org_id: install.org_id,
          type,
          owner_id: install.install_id,
          owner_type: 'installs',
          steps: installSteps(type, { install, components }),
        });
      }
    }
  }

  stop(): void {
    for (const t of this.timers) clearInterval(t);
    this.timers = [];
  }
}
