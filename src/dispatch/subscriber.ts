// One subscriber per webhook: the webhook's interests and match, applied to routed events
// (spec 2.2, 2.3; CONTRACT 6.3). Immutable: a changed webhook gets a new subscriber.
import type { EventRoute } from '../domain/event-route.ts';
import type { WebhookEntry } from '../domain/webhook-entry.ts';
import { interestsAdmit } from './interests.ts';
import { matchAdmits } from './match.ts';

export class WebhookSubscriber {
  readonly id: string;
  readonly org: string;
  /** disabled (CONTRACT 4.1): it wants events, and dispatch drops them (counted) */
  readonly disabled: boolean;

  constructor(readonly entry: WebhookEntry) {
    this.id = entry.webhook_id;
    this.org = entry.org_id;
    this.disabled = entry.disabled === true;
  }

  /** Does this webhook want the event? */
  wants(route: EventRoute): boolean {
    // a watchdog event never goes to the webhook it is about (CONTRACT 4.1), not even in a recovery
    if (route.not_to === this.id) return false;
    if (!interestsAdmit(this.entry.interests, route, this.entry.implicit_interests === true)) return false;
    return this.entry.match === null || matchAdmits(this.entry.match, route);
  }
}
