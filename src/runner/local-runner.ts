// The built-in local runner (CONTRACT 5.1): executes jobs in process and reports success through
// the same producer protocol an external runner uses, and sends the heartbeats of the runners it serves.
import type { Logger } from 'pino';
import { retry, type Clock, type Timer } from '../domain/clock.ts';
import type { Bus, Subscription } from '../bus/bus.ts';
import { ingestSubject, jobResultSubject, jobsWildcard } from '../bus/subjects.ts';
import type { Db } from '../../store/db.ts';
import { listRunners } from '../../store/runners.ts';

interface Job {
  job_id: string;
  org_id: string;
  runner_id: string;
  operation: string;
  plan_only?: boolean;
}

export class LocalRunner {
  private sub: Subscription | null = null;
  private timer: Timer | null = null;
  private readonly held = new Set<string>();
  private stopped = false;

  constructor(
    private readonly bus: Bus,
    private readonly db: Db,
    private readonly logger: Logger,
    private readonly clock: Clock,
    private readonly heartbeatEveryMs: number,
  ) {}

  start(): void {
    this.sub = this.bus.subscribe(jobsWildcard, (msg) => {
      let job: Job;
      try {
        job = msg.json<Job>();
      } catch {
        return;
      }
      if (!job?.job_id || this.held.has(job.job_id)) return; // a job sent again: already held
      this.held.add(job.job_id);
      void this.run(job);
    });
    this.heartbeats();
    this.timer = this.clock.setInterval(() => this.heartbeats(), this.heartbeatEveryMs);
  }

  private async run(job: Job): Promise<void> {
    const subject = jobResultSubject(job.org_id, job.job_id);
    await this.report(subject, { status: 'started' });
    const planning = job.plan_only || job.operation.endsWith('.plan');
    await this.report(subject, { status: 'succeeded', ...(planning ? { plan: { changes: [] } } : {}) });
  }

  /** Sends a job report, 5 times at most (waits of 200, 400, … ms on the clock between them). */
  private async report(subject: string, body: unknown): Promise<void> {
    const policy = {
      attempts: 5,
      delayMs: (n: number) => 200 * n,
      stopped: () => this.stopped,
      onError: (err: unknown) => this.logger.warn({ subject, err }, 'local runner report failed; retrying'),
    };
    await retry(this.clock, policy, async () => {
      const reply = await this.bus.request(subject, JSON.stringify(body), { timeoutMs: 5000 });
      const r = reply.json<{ ok: boolean; error?: string }>();
      if (!r.ok) this.logger.warn({ subject, error: r.error }, 'local runner report refused');
    }).catch(() => undefined); // the last failure is logged already
  }

  /** A `running` heartbeat for every runner (plain publishes, best effort). */
  heartbeats(): void {
    if (this.stopped) return;
    for (const r of listRunners(this.db)) {
      this.bus.publish(ingestSubject(r.org_id, 'runners', r.runner_id), JSON.stringify({ type: 'heartbeat', process: 'running' }));
    }
  }

  stop(): void {
    this.stopped = true;
    this.sub?.unsubscribe();
    this.timer?.cancel();
  }
}
