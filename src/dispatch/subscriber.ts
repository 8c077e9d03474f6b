// One subscriber actor per webhook: it applies the webhook's interests and match and delivers,
// with a bounded number of deliveries in flight so a hanging receiver only slows itself.
import type { Logger } from 'pino';
import type { Deliverer } from '../delivery/client.ts';
import { signingKeys, type SigningKeys } from '../delivery/signatures.ts';
import type { WebhookRow } from '../../store/webhooks.ts';
import { effectiveInterests, type Interests, type Match } from '../webhooks/subscription.ts';
import { interestsAdmit, type RoutedEvent } from './interests.ts';
import { matchAdmits, type EventEntities } from './match.ts';

export const MAX_IN_FLIGHT = 8;
export const MAX_QUEUED = 10_000;

export class WebhookSubscriber {
  private interests!: Interests;
  private match!: Match | null;
  private url!: string;
  private keys!: SigningKeys | null;
  private inFlight = 0;
  private readonly queue: Array<{ body: Buffer; id: string }> = [];
  private stopped = false;

  constructor(
    readonly webhookId: string,
    row: WebhookRow,
    private readonly deliverer: Deliverer,
    private readonly logger: Logger,
  ) {
    this.update(row);
  }

  update(row: WebhookRow): void {
    this.interests = effectiveInterests(row.interests);
    this.match = (row.match as Match | null) ?? null;
    this.url = row.url;
    this.keys = signingKeys(row); // decoded once per change, not per delivery
  }

  stop(): void {
    this.stopped = true;
    this.queue.length = 0;
  }

  /** Does this webhook want the event? */
  wants(route: RoutedEvent, entities: () => EventEntities): boolean {
    if (!interestsAdmit(this.interests, route)) return false;
    return this.match === null || matchAdmits(this.match, entities());
  }

  /** Queue the exact body bytes (of the CloudEvent with this id) for delivery. */
  offer(body: Buffer, id: string): void {
    if (this.stopped) return;
    if (this.inFlight < MAX_IN_FLIGHT) {
      this.send(body, id);
      return;
    }
    if (this.queue.length >= MAX_QUEUED) {
      this.logger.warn({ webhook_id: this.webhookId }, 'delivery queue full; event dropped');
      return;
    }
    this.queue.push({ body, id });
  }

  private send(body: Buffer, id: string): void {
    this.inFlight++;
    void this.deliverer
      .deliver({ url: this.url, secret: this.keys }, body, { eventId: id })
      .finally(() => {
        this.inFlight--;
        const next = this.queue.shift();
        if (next !== undefined && !this.stopped) this.send(next.body, next.id);
      });
  }
}
