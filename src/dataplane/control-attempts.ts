// Attempts the control plane makes itself, outside the data plane's queue: a ping, a resend
// (CONTRACT 4.5). One signed attempt of an event at one webhook, counted like any other: its
// outcome goes to the delivery status and the attempt log (`record`).
import type { Clock } from '../domain/clock.ts';
import { systemClock } from '../domain/clock.ts';
import { RECOVERY_HEADER, type Outcome } from '../domain/outcomes.ts';
import type { WebhookEntry } from '../domain/webhook-entry.ts';
import { WebhookSubscriber } from '../dispatch/subscriber.ts';
import { Deliverer, type AttemptResult } from '../delivery/client.ts';
import type { DeliveryLimits } from './data-plane.ts';
import { makeSigner } from './signer.ts';

export class ControlPlaneAttempts {
  private readonly deliverer: Deliverer;
  private readonly sign = makeSigner();

  constructor(
    limits: Pick<DeliveryLimits, 'timeoutMs' | 'allowPrivateTargets'>,
    /** the engine's clock: the time the signature carries */
    private readonly clock: Clock,
    private readonly record: (outcome: Outcome) => void,
  ) {
    this.deliverer = new Deliverer({ timeoutMs: limits.timeoutMs, allowPrivateTargets: limits.allowPrivateTargets });
  }

  /** One signed attempt of `body` at `webhook` (`recovery` = 'resend': sent as X-Svc-Recovery). */
  async attempt(webhook: WebhookEntry, eventId: string, type: string, body: Buffer, recovery?: string): Promise<AttemptResult> {
    const headers = this.sign(new WebhookSubscriber(webhook), eventId, body, this.clock.now());
    if (recovery) headers[RECOVERY_HEADER] = recovery;
    const r = await this.deliverer.attempt(webhook.url, headers, body);
    this.record({
      webhook_id: webhook.webhook_id,
      org_id: webhook.org_id,
      event_id: eventId,
      type,
      ok: r.delivered,
      status: r.status ?? null,
      error: r.error ?? null,
      duration_ms: r.duration_ms,
      at: systemClock.now(), // the delivery machinery's real time, as every outcome
      ...(recovery ? { recovery_id: recovery } : {}),
    });
    return r;
  }

  close(): Promise<void> {
    return this.deliverer.close(0);
  }
}
