// One subscriber per webhook: the webhook's interests, match and filter, applied to routed events
// (spec 2.2, 2.3; CONTRACT 6.3, 10.2). Immutable: a changed webhook gets a new subscriber, its
// filter compiled once here.
import type { EventRoute } from '../domain/event-route.ts';
import { compileOptional, type CompiledFilter } from '../domain/event-filter.ts';
import type { WebhookEntry } from '../domain/webhook-entry.ts';
import { interestsAdmit } from './interests.ts';
import { matchAdmits } from './match.ts';

/**
 * The CloudEvent of an event, parsed from its body the first time a filter asks for it: once per
 * event whatever the number of filtered webhooks, never when none has a filter.
 */
export class ParsedEvent {
  private parsed = false;
  private value: unknown;

  constructor(private readonly body: Buffer | string) {}

  /** The CloudEvent as delivered (undefined when the body is not JSON: every path of it is missing). */
  get event(): unknown {
    if (!this.parsed) {
      this.parsed = true;
      try {
        this.value = JSON.parse(typeof this.body === 'string' ? this.body : this.body.toString('utf8'));
      } catch {
        this.value = undefined;
      }
    }
    return this.value;
  }

  /** An event already parsed (a dry run's given CloudEvent). */
  static of(event: unknown): ParsedEvent {
    const p = new ParsedEvent('');
    p.parsed = true;
    p.value = event;
    return p;
  }
}

/** Whether a webhook gets an event, and what decided (CONTRACT 10.2 `decided_by`). */
export interface Verdict {
  matched: boolean;
  /** `interests`, `match`, or the filter's clause path (`data.install.labels.ring.$in`) */
  decided_by: string;
}

export class WebhookSubscriber {
  readonly id: string;
  readonly org: string;
  /** disabled (CONTRACT 4.1): it wants events, and dispatch drops them (counted) */
  readonly disabled: boolean;
  /** the payload filter compiled (CONTRACT 10.2), null: none */
  readonly filter: CompiledFilter | null;

  constructor(readonly entry: WebhookEntry) {
    this.id = entry.webhook_id;
    this.org = entry.org_id;
    this.disabled = entry.disabled === true;
    this.filter = compileOptional(entry.filter);
  }

  /** Do its interests and match admit the event (the route alone; the filter aside)? */
  admitsRoute(route: EventRoute): boolean {
    return this.routeAdmits(route) === null;
  }

  /** What of its interests and match refuses the event (what the route alone tells); null: neither. */
  private routeAdmits(route: EventRoute): 'interests' | 'match' | null {
    // a watchdog event never goes to the webhook it is about (CONTRACT 4.1), not even in a recovery
    if (route.not_to === this.id) return 'interests';
    if (!interestsAdmit(this.entry.interests, route, this.entry.implicit_interests === true)) return 'interests';
    if (this.entry.match !== null && !matchAdmits(this.entry.match, route)) return 'match';
    return null;
  }

  /**
   * Does this webhook want the event? `event`: its CloudEvent, read only when the webhook has a
   * filter (a filtered webhook asked without it refuses the event).
   */
  wants(route: EventRoute, event?: ParsedEvent): boolean {
    if (this.routeAdmits(route) !== null) return false;
    return this.filter === null || (event !== undefined && this.filter.test(event.event));
  }

  /** The same decision, saying what decided it (the dry runs and recipients, CONTRACT 10.2). */
  verdict(route: EventRoute, event: ParsedEvent): Verdict {
    const refused = this.routeAdmits(route);
    if (refused !== null) return { matched: false, decided_by: refused };
    if (this.filter === null) return { matched: true, decided_by: this.entry.match === null ? 'interests' : 'match' };
    const d = this.filter.explain(event.event);
    return { matched: d.matched, decided_by: d.clause };
  }
}
