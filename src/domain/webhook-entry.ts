// A webhook as the data plane knows it: what dispatch matches and delivery signs with. The control
// plane builds it from the store and replicates it (NATS KV, or in memory); the data plane reads
// nothing else about webhooks.
import type { EventFilter } from './event-filter.ts';
import type { Interests, Match } from './subscription.ts';

/** Where a webhook's attempts go and what signs them: what the stored row and the entry share. */
export interface WebhookTarget {
  webhook_id: string;
  org_id: string;
  url: string;
  secret: string | null;
  /** a rotated-out secret that still signs beside `secret` until previous_secret_expires_at */
  previous_secret: string | null;
  previous_secret_expires_at: string | null;
}

export interface WebhookEntry extends WebhookTarget {
  /** effective interests (legacy and empty documents already mean all_events) */
  interests: Interests;
  /**
   * No interests were given (stored empty or legacy): they read as all_events, but the delivery
   * watchdog's events (new in 0.2) are not sent to it, so that a webhook that chose nothing keeps
   * getting what it got before them. Absent when interests were chosen.
   */
  implicit_interests?: true;
  match: Match | null;
  /** the payload filter (CONTRACT 10.2), applied after interests and match; absent: none */
  filter?: EventFilter;
  /**
   * Disabled by the delivery watchdog or by hand (CONTRACT 4.1): it gets no attempts, and its
   * queued ones are dropped. Absent when it is not (entries from before 0.2 read the same).
   */
  disabled?: true;
  /**
   * `delivery: {ordering: "per_key"}` (CONTRACT 10.1): its attempts are serialised per ordering key.
   * Absent when it is not (entries from before 0.3 read the same).
   */
  ordering?: 'per_key';
  /**
   * The registry version it was created at: an event emitted before (Route.rev older) is not its,
   * however late it is dispatched. Absent: 0 (webhooks from before it was recorded).
   */
  since_rev?: number;
}
