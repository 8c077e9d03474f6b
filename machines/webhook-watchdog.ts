// The delivery watchdog of one webhook (CONTRACT 4.1 "Delivery watchdog"): over the outcomes of its
// attempts, active → failing → disabled → active. Pure: no I/O, no clocks (times come in with the
// events). What it emits the engine turns into `com.svc.webhook.delivery.v1` events (CONTRACT 6.2)
// in the transaction that stores its new state.
import { assign, emit, setup } from 'xstate';
import { machineSteps } from './advance.ts';

export type WatchState = 'active' | 'failing' | 'disabled';
export const WATCH_STATES: readonly WatchState[] = ['active', 'failing', 'disabled'];

/** Opt-in auto-disable (CONTRACT 4.1 `disable_after`): both must hold. */
export interface DisablePolicy {
  failures: number;
  duration_ms: number;
}

/** The webhook's current streak of failed attempts, as the delivery status has it. */
export interface Streak {
  consecutive_failures: number;
  /** the first failed attempt of the streak (ISO 8601), null without a streak */
  failing_since: string | null;
  /** the `time` of the earliest event that failed in the streak */
  recover_since: string | null;
  /** how many events (not pings) failed in the streak */
  failed_events: number;
  last_error: string | null;
  last_status_code: number | null;
}

export interface WatchContext {
  /** the streak length of the last `failing` event (0: none since the last success) */
  notified: number;
  disabled_at: string | null;
  disabled_reason: string | null;
  /** where a recovery on enable starts: the streak's recover_since when disabled, else disabled_at */
  recover_since: string | null;
}

export type WatchEvent =
  | { type: 'failure'; streak: Streak; at: string; policy: DisablePolicy | null }
  | { type: 'success'; streak: Streak }
  | { type: 'disable'; streak: Streak; at: string; note?: string }
  | { type: 'enable'; streak: Streak; at: string };

export type WatchTransition = 'failing' | 'recovered' | 'disabled' | 'enabled';

export interface WatchEmit {
  type: WatchTransition;
  streak: Streak;
  /** on `disabled` */
  reason?: string;
}

/** The streak lengths that make a `failing` event: 5, 20, 50, then every further 100. */
export function failingThreshold(after: number): number {
  if (after < 5) return 5;
  if (after < 20) return 20;
  if (after < 50) return 50;
  return 50 + 100 * (Math.floor((after - 50) / 100) + 1);
}

/** The largest threshold at or below n (0 below 5). */
function thresholdReached(n: number): number {
  if (n < 5) return 0;
  if (n < 20) return 5;
  if (n < 50) return 20;
  return 50 + 100 * Math.floor((n - 50) / 100);
}

/** Whether a failure with this streak disables the webhook under its policy. */
export function disableDue(policy: DisablePolicy | null, streak: Streak, at: string): boolean {
  if (!policy || streak.consecutive_failures < policy.failures || !streak.failing_since) return false;
  return Date.parse(at) - Date.parse(streak.failing_since) >= policy.duration_ms;
}

/**
 * Whether an outcome can change anything, decided without the machine (the cheap test on the
 * delivery path): a failure at or past the next threshold or due to disable, a success while failing.
 */
export function watchdogCares(state: WatchState, context: WatchContext, e: WatchEvent): boolean {
  switch (e.type) {
    case 'failure':
      return (
        state !== 'disabled' &&
        (e.streak.consecutive_failures >= failingThreshold(context.notified) || disableDue(e.policy, e.streak, e.at))
      );
    case 'success':
      return state === 'failing';
    case 'disable':
      return state !== 'disabled';
    case 'enable':
      return state === 'disabled';
  }
}

export const autoDisableReason = (s: Streak): string => `auto: ${s.consecutive_failures} consecutive failures since ${s.failing_since}`;

const CLEAR = { notified: 0, disabled_at: null, disabled_reason: null, recover_since: null } satisfies WatchContext;

/** Why a disable: the automatic reason, or the note given to `disable`, or "manual". */
function disableReason(event: WatchEvent): string {
  return event.type === 'failure' ? autoDisableReason(event.streak) : ((event.type === 'disable' ? event.note : undefined) ?? 'manual');
}

function disabledContext(event: WatchEvent): WatchContext {
  const at = event.type === 'failure' || event.type === 'disable' ? event.at : null;
  return { notified: 0, disabled_at: at, disabled_reason: disableReason(event), recover_since: event.streak.recover_since ?? at };
}

/** To disabled (a failure past the policy, or `disable`): the `disabled` event, then the context that records it. */
const TO_DISABLED = { target: 'disabled', actions: ['emitDisabled', 'recordDisable'] } as const;

export const webhookWatchdogMachine = setup({
  types: {
    context: {} as WatchContext,
    events: {} as WatchEvent,
    emitted: {} as WatchEmit,
  },
  guards: {
    disableDue: ({ event }) => event.type === 'failure' && disableDue(event.policy, event.streak, event.at),
    nextThreshold: ({ context, event }) =>
      event.type === 'failure' && event.streak.consecutive_failures >= failingThreshold(context.notified),
  },
  actions: {
    // the emits run before the assigns of the same transition, so they see the context as it was
    emitDisabled: emit(({ event }) => ({ type: 'disabled' as const, streak: event.streak, reason: disableReason(event) })),
    emitFailing: emit(({ event }) => ({ type: 'failing' as const, streak: event.streak })),
    notify: assign({ notified: ({ event }) => thresholdReached(event.streak.consecutive_failures) }),
    clear: assign(() => ({ ...CLEAR })),
    recordDisable: assign(({ event }) => disabledContext(event)),
  },
}).createMachine({
  id: 'webhookWatchdog',
  initial: 'active',
  context: { ...CLEAR },
  states: {
    active: {
      on: {
        failure: [
          { guard: 'disableDue', ...TO_DISABLED },
          { guard: 'nextThreshold', target: 'failing', actions: ['emitFailing', 'notify'] },
        ],
        disable: TO_DISABLED,
      },
    },
    failing: {
      on: {
        failure: [
          { guard: 'disableDue', ...TO_DISABLED },
          { guard: 'nextThreshold', actions: ['emitFailing', 'notify'] },
        ],
        success: { target: 'active', actions: [emit(({ event }) => ({ type: 'recovered' as const, streak: event.streak })), 'clear'] },
        disable: TO_DISABLED,
      },
    },
    disabled: {
      on: {
        enable: { target: 'active', actions: [emit(({ event }) => ({ type: 'enabled' as const, streak: event.streak })), 'clear'] },
      },
    },
  },
});

/** The context as stored (JSON; null before the first transition). */
export function watchContextOf(stored: unknown): WatchContext {
  return stored && typeof stored === 'object' ? { ...CLEAR, ...(stored as Partial<WatchContext>) } : { ...CLEAR };
}

export const { initial: initialWatchdog, advance: advanceWatchdog } = machineSteps<WatchState, WatchContext, WatchEvent, WatchEmit>(
  webhookWatchdogMachine,
);
