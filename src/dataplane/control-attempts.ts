// Pings and resends (CONTRACT 4.1, 4.5): one signed attempt of an event at one webhook, asked for
// through the API and answered with its result. They take fair slots as deliveries do (CONTRACT 8,
// ./slots.ts): round robin over orgs, a share cap while another org waits, 8 in flight per webhook,
// 1 while its breaker is open, a reserve that an org of hanging receivers cannot fill. So an org's
// 100 hanging resends hold a few slots and wait for them in their own queue, and another org's
// ping starts at once; the deliverer's pools do not cap connections per origin (src/delivery/
// client.ts), so it is not queued behind them at a receiver host they share either. An attempt's
// timeout starts when it has its slot (CONTRACT 6.4).
import { systemClock, type Clock } from '../domain/clock.ts';
import { RECOVERY_HEADER } from '../delivery/signing.ts';
import { outcomeOf, type DeliveryOutcome } from '../outcomes/outcome.ts';
import type { WebhookEntry } from '../domain/webhook-entry.ts';
import { WebhookSubscriber } from '../dispatch/subscriber.ts';
import { Deliverer, type AttemptResult } from '../delivery/client.ts';
import type { DeliveryLimits } from './data-plane.ts';
import { PER_WEBHOOK_IN_FLIGHT, type Signer } from './pipeline.ts';
import { makeSigner } from './signer.ts';
import { FairSlots, type Grant } from './slots.ts';

/** Pings and resends in flight at most, all orgs together (and 8 per webhook, as deliveries: PER_WEBHOOK_IN_FLIGHT). */
const CONTROL_CONCURRENCY = 64;

interface ControlAttemptOptions {
  deliverer: Deliverer;
  sign: Signer;
  /** delivery time: the slots, each outcome's time (the delivery machinery's real time) */
  clock: Clock;
  /** the time signatures carry (the engine's; default clock) */
  signClock?: Clock;
  /** each attempt's outcome (delivery status, the attempt log) */
  record(outcome: DeliveryOutcome): void;
  concurrency?: number;
}

interface Pending {
  sub: WebhookSubscriber;
  eventId: string;
  type: string;
  body: Buffer;
  recovery: string | undefined;
  resolve(r: AttemptResult): void;
}

export class ControlPlaneAttempts {
  private readonly slots: FairSlots<Pending>;
  private readonly o: ControlAttemptOptions;

  constructor(
    limits: Pick<DeliveryLimits, 'timeoutMs' | 'allowPrivateTargets'>,
    o: Partial<ControlAttemptOptions> & Pick<ControlAttemptOptions, 'record'>,
  ) {
    this.o = {
      deliverer: new Deliverer({ timeoutMs: limits.timeoutMs, allowPrivateTargets: limits.allowPrivateTargets }),
      sign: makeSigner(),
      clock: systemClock,
      ...o,
    };
    this.slots = new FairSlots({
      clock: this.o.clock,
      concurrency: this.o.concurrency ?? CONTROL_CONCURRENCY,
      perWebhook: PER_WEBHOOK_IN_FLIGHT,
    });
  }

  /** One attempt of the event at this webhook, once it has a slot; resolves its result (never rejects). */
  attempt(webhook: WebhookEntry, eventId: string, type: string, body: Buffer, recovery?: string): Promise<AttemptResult> {
    return new Promise((resolve) => {
      this.slots.push(webhook.org_id, webhook.webhook_id, { sub: new WebhookSubscriber(webhook), eventId, type, body, recovery, resolve });
      this.pump();
    });
  }

  /** Attempts in flight. */
  inFlight(): number {
    return this.slots.inFlight;
  }

  /** Attempts waiting for a slot. */
  queued(): number {
    return this.slots.queued;
  }

  private pump(): void {
    for (let g = this.slots.next(); g; g = this.slots.next()) this.start(g);
  }

  private start(g: Grant<Pending>): void {
    const p = g.item;
    const headers = this.o.sign(p.sub, p.eventId, p.body, (this.o.signClock ?? this.o.clock).now());
    if (p.recovery) headers[RECOVERY_HEADER] = p.recovery;
    this.o.deliverer.send(p.sub.entry.url, headers, p.body, (r) => {
      this.slots.done(g, r.delivered);
      this.o.record(
        outcomeOf(
          { webhook_id: p.sub.id, org_id: p.sub.org, event_id: p.eventId, type: p.type, recovery_id: p.recovery },
          r,
          this.o.clock.now(),
        ),
      );
      p.resolve(r);
      this.pump();
    });
  }

  /** Stop: what waits for a slot fails at once; what is in flight finishes within graceMs. */
  async close(graceMs = 0): Promise<void> {
    // the deliverer is closed first: each attempt still waiting then fails at once when started
    await this.o.deliverer.close(graceMs);
    this.pump();
  }
}
