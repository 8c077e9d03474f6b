// Verification gates, the part outside transactions (CONTRACT 4.3 `verification`): it wakes each
// running verify step at the moment its machine says (on the engine's clock), asks in one
// transaction which URLs are due (the attempt is counted and committed before the request), sends
// each request after the commit (signed like a delivery, through the target guard, never holding a
// transaction open during the HTTP exchange), and records each answer in a transaction of its own.
// Nothing about the schedule lives only in memory: at start (resume) every running verify step is
// armed at the next-ask time its params hold, so polling goes on within one interval after a
// restart, kill -9 included (a request lost in flight is asked again one interval after it was made).
import type { Logger } from 'pino';
import type { Db } from '../../../store/db.ts';
import { listVerifyingSteps } from '../../../store/verifications.ts';
import { systemClock, type Clock, type Timer } from '../../domain/clock.ts';
import { readAnswer, type VerifyAnswer } from '../../domain/verification.ts';
import { signatureHeaders, signingKeys } from '../../delivery/signing.ts';
import { postVerification } from '../../delivery/verify-request.ts';
import { verificationEvent } from '../../events/verification-request.ts';
import type { Transactions } from '../transaction.ts';
import type { VerifyAsk, VerifyNext, VerifySteps } from './verify.ts';

export interface VerifierDeps {
  db: Db;
  /** the engine's clock: when to ask, the time of facts and of signatures */
  clock: Clock;
  tx: Transactions;
  steps: () => VerifySteps;
  logger: Logger;
  urls: () => { base: string; source: string; dashboard: string };
  allowPrivateTargets: boolean;
  /** each request's timeout runs on this clock (real time, as deliveries) */
  httpClock?: Clock;
}

const keyOf = (workflowId: string, stepId: string) => `${workflowId}/${stepId}`;

export class Verifier {
  /** per step, its next wake (one timer, at the earliest moment asked for) */
  private readonly timers = new Map<string, { at: number; timer: Timer | null; immediate: NodeJS.Immediate | null }>();
  /** per step, the URLs (indexes) whose request is in flight in this process */
  private readonly inFlight = new Map<string, Set<number>>();
  private readonly abort = new AbortController();
  private closed = false;

  constructor(private readonly d: VerifierDeps) {}

  /** Look at this verify step at `at` (engine clock, ms); at once when that is now or past. */
  arm(workflowId: string, stepId: string, at: number): void {
    if (this.closed) return;
    const key = keyOf(workflowId, stepId);
    const cur = this.timers.get(key);
    if (cur && cur.at <= at) return;
    this.disarm(key);
    const fire = () => {
      this.timers.delete(key);
      this.poll(workflowId, stepId);
    };
    const delay = at - this.d.clock.now();
    const entry = { at, timer: null as Timer | null, immediate: null as NodeJS.Immediate | null };
    if (delay <= 0) entry.immediate = setImmediate(fire);
    else entry.timer = this.d.clock.setTimeout(fire, delay);
    this.timers.set(key, entry);
  }

  /** At start: every verify step still running is armed at its next-ask time, as SQLite holds it. */
  resume(): number {
    let n = 0;
    for (const s of listVerifyingSteps(this.d.db)) {
      const at = this.d.steps().wakeAtOf(s.workflow_id, s.step_id);
      if (at === null) continue;
      this.arm(s.workflow_id, s.step_id, at);
      n++;
    }
    return n;
  }

  close(): void {
    this.closed = true;
    for (const key of [...this.timers.keys()]) this.disarm(key);
    this.abort.abort(new Error('engine closing'));
  }

  private disarm(key: string): void {
    const cur = this.timers.get(key);
    if (!cur) return;
    cur.timer?.cancel();
    if (cur.immediate) clearImmediate(cur.immediate);
    this.timers.delete(key);
  }

  private poll(workflowId: string, stepId: string): void {
    if (this.closed) return;
    const busy = [...(this.inFlight.get(keyOf(workflowId, stepId)) ?? [])];
    this.act(workflowId, stepId, () => this.d.tx.run((t) => this.d.steps().tick(t, workflowId, stepId, busy)));
  }

  /** Act on what a poll or an answer left: send its requests, wake again when it says. */
  private act(workflowId: string, stepId: string, fn: () => VerifyNext): void {
    let next: VerifyNext;
    try {
      next = fn();
    } catch (err) {
      // the store refused (busy, closing): look again a moment later, nothing was recorded
      this.d.logger.warn(
        { err: String(err), workflow_id: workflowId, step_id: stepId },
        'verification: could not record a poll or an answer',
      );
      if (!this.closed) this.arm(workflowId, stepId, this.d.clock.now() + 1000);
      return;
    }
    for (const ask of next.asks) void this.send(workflowId, stepId, ask);
    if (next.wakeAt !== null) this.arm(workflowId, stepId, next.wakeAt);
  }

  private async send(workflowId: string, stepId: string, ask: VerifyAsk): Promise<void> {
    const key = keyOf(workflowId, stepId);
    let busy = this.inFlight.get(key);
    if (!busy) this.inFlight.set(key, (busy = new Set()));
    busy.add(ask.index);
    let answer: Omit<VerifyAnswer, 'at'>;
    try {
      const urls = this.d.urls();
      const now = this.d.clock.now();
      const ev = verificationEvent(ask.request, { source: urls.source, baseUrl: urls.base, dashboardUrl: urls.dashboard, nowMs: now });
      const body = Buffer.from(JSON.stringify(ev), 'utf8');
      const v = ask.verification;
      // signed on real time, as deliveries are: the receiver checks webhook-timestamp against its own clock
      const headers: Record<string, string> = {
        ...signatureHeaders(v.secret ? signingKeys({ secret: v.secret }) : null, ev.id, body, (this.d.httpClock ?? systemClock).now()),
      };
      const res = await postVerification(v.url, headers, body, {
        timeoutMs: v.timeout_ms,
        allowPrivateTargets: this.d.allowPrivateTargets,
        clock: this.d.httpClock ?? systemClock,
        signal: this.abort.signal,
      });
      answer =
        res.status !== undefined
          ? readAnswer(res.status, res.body ?? '')
          : { verdict: 'error', status: null, error: res.error ?? 'no answer', reason: null };
    } finally {
      busy.delete(ask.index);
      if (!busy.size) this.inFlight.delete(key);
    }
    if (this.closed) return; // the process stops: the next one asks again (the ask is recorded, its answer is not)
    this.act(workflowId, stepId, () => this.d.tx.run((t) => this.d.steps().answer(t, workflowId, stepId, ask.index, answer)));
  }
}
