// Wakeups on the engine's clock (src/domain/clock.ts): a step policy that must be looked at again
// at a moment asks here, and the engine, the one listener, does the looking (in a transaction of
// its own). A gate's bad verdict will have lasted its `for` (the bakes' tick), a change window
// opens or a wait times out (the windows' review), a verify step's next ask is due (the Verifier,
// once what asked is committed), an approval step's policy expires it. Nothing here is kept: after
// a restart the scheduler's ticks and the Verifier's resume pick up from what SQLite holds.
import type { Clock } from '../domain/clock.ts';

/** Who is woken (the engine). */
export interface WakeupListener {
  /** the bakes' tick: bakes whose time is up pass, streaks that lasted `for` trip */
  bakes(): void;
  /** the change windows' review: waits due on the clock */
  windows(): void;
  /** one verify step, to be looked at at `at` (engine clock, ms) */
  verify(workflowId: string, stepId: string, at: number): void;
  /** approval steps whose policy's expires_after has passed (CONTRACT 10.4) */
  approvals(): void;
}

/** The longest a timer can wait (setTimeout's limit); a later moment is looked at then, and again. */
const MAX_DELAY_MS = 2 ** 31 - 1;

export class Wakeups {
  private listener: WakeupListener | null = null;

  constructor(private readonly clock: Clock) {}

  /** The engine listens (once, when built). */
  listen(listener: WakeupListener): void {
    this.listener = listener;
  }

  /** Run the bakes' tick at `at` (engine clock, ms). */
  bakesAt(at: number): void {
    this.timer(at, () => this.listener?.bakes());
  }

  /** Review the change-window waits at `at` (engine clock, ms). */
  windowsAt(at: number): void {
    this.timer(at, () => this.listener?.windows());
  }

  /** Look at the approval steps due to expire at `at` (engine clock, ms). */
  approvalsAt(at: number): void {
    this.timer(at, () => this.listener?.approvals());
  }

  /** Look at a verify step at `at` (engine clock, ms). */
  verifyAt(workflowId: string, stepId: string, at: number): void {
    this.listener?.verify(workflowId, stepId, at);
  }

  private timer(at: number, fn: () => void): void {
    this.clock.setTimeout(fn, Math.max(0, Math.min(at - this.clock.now(), MAX_DELAY_MS)));
  }
}
