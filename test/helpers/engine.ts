// An Engine (src/engine/engine.ts) on its own for unit tests: an in-memory SQLite store, the
// in-process bus (the engine sends jobs on it; a test plays the runner through engine.ingest, as
// src/ingest would), a ManualClock, and the outbox read back as the CloudEvents each commit wrote.
import pino from 'pino';
import type { Bus } from '../../src/bus/bus.ts';
import { createMemoryBus } from '../../src/bus/memory.ts';
import { ManualClock } from './clock.ts';
import { newId } from '../../src/domain/ids.ts';
import type { AppConfigBody } from '../../src/domain/app-config.ts';
import type { JobResult } from '../../src/domain/producer-messages.ts';
import { Engine, type ProducerFact } from '../../src/engine/engine.ts';
import { Scheduler } from '../../src/engine/scheduler.ts';
import { createMetrics, type Metrics } from '../../src/metrics.ts';
import { insertApp, insertConfig, type AppConfig } from '../../store/apps.ts';
import { openDb, type Db } from '../../store/db.ts';
import type { Install } from '../../store/installs.ts';
import { createOrg } from '../../store/orgs.ts';
import { readOutbox } from '../../store/outbox.ts';
import { outboxEventQueue } from '../../src/topology/embedded.ts';
import type { Job } from './fake-runner.ts';

type Json = any;

export const logger = pino({ level: 'silent' });
export const BASE_URL = 'http://svc.test';
export const SOURCE = '//svc.test/ctl-api';
export const DASHBOARD = 'http://svc.test/dashboard';
/** the runner health interval of schedule() */
export const HEALTH_EVERY_MS = 60_000;

export const CONFIG: AppConfigBody = {
  sandbox: { size: 'small' },
  components: [
    { name: 'api', labels: { tier: 'web' }, values: { image: 'api:1' } },
    { name: 'worker', values: { image: 'worker:1' } },
  ],
};
export const CONFIG_V2: AppConfigBody = {
  sandbox: { size: 'small' },
  components: [
    { name: 'api', labels: { tier: 'web' }, values: { image: 'api:2' } },
    { name: 'worker', values: { image: 'worker:1' } },
  ],
};

/** One engine with everything it needs, and what a test reads back. */
export class EngineWorld {
  readonly db: Db;
  readonly bus: Bus = createMemoryBus({ logger });
  readonly clock = new ManualClock();
  readonly metrics: Metrics = createMetrics();
  /** every job message the engine published, re-sends included, in order */
  readonly sent: Job[] = [];
  /** how many commits told the relay that the outbox changed */
  outboxKicks = 0;
  readonly engine: Engine;
  private scheduler: Scheduler | null = null;
  private readonly answered = new Set<string>();

  /** dbFile: a store on disk (WAL, as svc serve has it) instead of in memory */
  constructor(opts: { dbFile?: string } = {}) {
    this.db = openDb(opts.dbFile ?? ':memory:');
    this.engine = new Engine({
      db: this.db,
      bus: this.bus,
      clock: this.clock,
      logger,
      metrics: this.metrics,
      urls: () => ({ base: BASE_URL, source: SOURCE, dashboard: DASHBOARD }),
      registryRev: () => 0,
      queue: outboxEventQueue(this.db, () => void this.outboxKicks++),
    });
    this.bus.subscribe('svc.jobs.>', (m) => void this.sent.push(m.json<Job>()));
  }

  /** The engine's timers on this world's clock (what `svc serve` starts). */
  schedule(opts: { driftIntervalMs?: number } = {}): void {
    this.scheduler = new Scheduler(this.engine, this.clock, logger);
    this.scheduler.start({ runnerHealthIntervalMs: HEALTH_EVERY_MS, driftIntervalMs: opts.driftIntervalMs ?? null });
  }

  org(): string {
    return createOrg(this.db, 'engine-test').org.org_id;
  }

  config(
    orgId: string,
    body: AppConfigBody = CONFIG,
    appId = insertApp(this.db, { app_id: newId('app'), org_id: orgId, name: 'shop' }).app_id,
  ): AppConfig {
    return insertConfig(this.db, { app_config_id: newId('cfg'), app_id: appId, org_id: orgId, body });
  }

  install(orgId: string, config: AppConfig, labels: Record<string, string> = {}): Install {
    return this.engine.createInstall(
      { org_id: orgId, app_id: config.app_id, name: `i${this.sent.length}`, labels, app_branch_id: null },
      config,
    );
  }

  /** The CloudEvents committed so far, in commit order. */
  events(): Json[] {
    return readOutbox(this.db, 0, 100_000).map((r) => JSON.parse(r.body));
  }

  /** The jobs sent so far (first sending of each). */
  async jobs(): Promise<Job[]> {
    await this.bus.flush();
    const seen = new Set<string>();
    return this.sent.filter((j) => !seen.has(j.job_id) && seen.add(j.job_id));
  }

  /** Producers' facts through the engine; each must commit. Resolves the results (`unclassified`: one that can never emit). */
  ingest(...facts: ProducerFact[]): string[] {
    return this.engine.ingest(facts).map((r, i) => {
      if (!r.ok) throw new Error(`fact ${i} refused: ${String(r.error)}`);
      return typeof r.value === 'string' ? r.value : r.value.result;
    });
  }

  report(job: Job, body: JobResult): string {
    this.answered.add(job.job_id);
    return this.ingest({ family: 'jobs', orgId: job.org_id, id: job.job_id, body })[0];
  }

  /** Answer every job not answered yet (by default started, then succeeded with a clean plan), until none is left. */
  async runJobs(
    answer: (job: Job) => JobResult[] = (j) => [
      { status: 'started' },
      { status: 'succeeded', ...(j.plan_only ? { plan: { changes: [] } } : {}) },
    ],
  ): Promise<Job[]> {
    const done: Job[] = [];
    for (;;) {
      const next = (await this.jobs()).find((j) => !this.answered.has(j.job_id));
      if (!next) return done;
      this.answered.add(next.job_id);
      for (const body of answer(next)) this.report(next, body);
      done.push(next);
    }
  }

  close(): void {
    this.scheduler?.stop();
    this.engine.close();
    void this.bus.close();
    this.db.close();
  }
}
