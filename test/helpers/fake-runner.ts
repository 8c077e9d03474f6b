// An external runner for tests (svc with localRunner: false): it takes jobs from the server's bus
// and answers them per `policy`, through the producer protocol (CONTRACT 5.2).
import type { Bus, Subscription } from '../../src/bus/bus.ts';
import { jobResultSubject } from '../../src/bus/subjects.ts';
import { waitFor } from './wait.ts';

export interface Job {
  job_id: string;
  org_id: string;
  runner_id: string;
  install_id: string | null;
  workflow_id: string;
  step_id: string;
  operation: string;
  component_id?: string;
  sandbox_id?: string;
  action_id?: string;
  app_config_id?: string;
  plan_only: boolean;
}

export type Answer = Array<{ status: string; error?: string; plan?: { changes: Array<{ address: string; action: string }> } }>;

/** started, then succeeded (a plan job's plan has no changes). */
export const autoAnswer = (job: Job): Answer => [
  { status: 'started' },
  { status: 'succeeded', ...(job.operation.endsWith('.plan') ? { plan: { changes: [] } } : {}) },
];

/**
 * `policy` decides per job: the messages to send, in order, or 'hold' to keep it unanswered
 * (answer it later with `send` or `finish`). A job sent again (same job_id) is ignored.
 */
export class FakeRunner {
  readonly jobs: Job[] = [];
  readonly held: Job[] = [];
  private readonly seen = new Set<string>();
  private readonly sub: Subscription;
  /** answers on their way (requests not yet replied to) */
  private sending = 0;

  constructor(
    private readonly bus: Bus,
    public policy: (job: Job) => Answer | 'hold' = autoAnswer,
  ) {
    this.sub = bus.subscribe('svc.jobs.>', (msg) => {
      const job = msg.json<Job>();
      if (this.seen.has(job.job_id)) return;
      this.seen.add(job.job_id);
      this.jobs.push(job);
      const what = this.policy(job);
      if (what === 'hold') this.held.push(job);
      else void this.send(job, what);
    });
  }

  /** Hold the jobs `pred` selects; answer the others at once. */
  holdWhen(pred: (job: Job) => boolean): void {
    this.policy = (job) => (pred(job) ? 'hold' : autoAnswer(job));
  }

  /** Send the messages of `answer` for a job; resolves the engine's replies. */
  async send(job: Job, answer: Answer): Promise<Array<{ ok: boolean; error?: string }>> {
    this.sending++;
    try {
      const replies: Array<{ ok: boolean; error?: string }> = [];
      for (const body of answer) {
        const r = await this.bus.request(jobResultSubject(job.org_id, job.job_id), JSON.stringify(body), { timeoutMs: 5000 });
        replies.push(r.json());
      }
      return replies;
    } finally {
      this.sending--;
    }
  }

  /**
   * Wait until the engine and this runner are still: every job sent so far has been taken off the
   * bus, and every answer sent is committed (the engine replies only after the commit, and sends
   * the next job before it replies). Only held jobs remain: nothing moves until the test acts.
   */
  async idle(timeoutMs = 10_000): Promise<void> {
    const still = async () => {
      const jobs = this.jobs.length;
      await this.bus.flush();
      return this.sending === 0 && this.jobs.length === jobs;
    };
    await waitFor(still, timeoutMs, () => `the runner to be still (${this.sending} answers on their way)`, 10);
  }

  /** Answer a (held) job: started, then succeeded. */
  async finish(job: Job): Promise<void> {
    await this.send(job, autoAnswer(job));
  }

  stop(): void {
    this.sub.unsubscribe();
  }
}
