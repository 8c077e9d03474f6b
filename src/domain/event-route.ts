// The route of an event: what dispatch needs to decide which webhooks get it, computed once where
// the event is emitted (src/events/routing.ts) and carried beside the body (an outbox column, a bus
// header). Dispatch never parses the body, and never turns slugs back into a route.

export type Labels = Record<string, string>;

/** An entity an event is about, with its labels at emission time (null: unknown to this org). */
export interface RouteEntity {
  id: string;
  labels: Labels | null;
}

export interface EventRoute {
  /** the org whose webhooks may get the event */
  org: string;
  /** the CloudEvents type (for logs and outcomes) */
  type: string;
  /** classification (CONTRACT 6.1); '' for an event that is not classified (ping) */
  resource: string;
  op: string;
  /** the `event:` slug without its prefix: 'lifecycle.started', 'approval.request', 'runner.unhealthy', … */
  event: string;
  /** the entities `match` tests (CONTRACT 6.3): install, component, action of the event */
  install: RouteEntity | null;
  component: RouteEntity | null;
  action: RouteEntity | null;
  /**
   * The webhook registry revision this event must be matched against: a data plane that has not
   * yet seen this revision of the replicated registry waits for it (0 = any).
   */
  rev: number;
  /** a webhook this event never goes to: the one a `com.svc.webhook.delivery.v1` event is about (CONTRACT 4.1) */
  not_to?: string;
  /** the event's ordering key (CONTRACT 10.1 svcorderkey): a `per_key` webhook's attempts of it are made one at a time */
  key?: string;
  /**
   * A recovery (CONTRACT 4.5): this queue item is one attempt of a kept event at one webhook alone
   * (not matched again), carrying the event's own id and `X-Svc-Recovery: <id>`. The item's own id
   * (the queue's message id) differs from the event's, so that a recovery is not a duplicate.
   */
  recovery?: RouteRecovery;
}

export interface RouteRecovery {
  /** the recovery id (the X-Svc-Recovery header) */
  id: string;
  webhook: string;
  /** the CloudEvent id (webhook-id) */
  event_id: string;
}

/** The id of the queue item that carries one recovery attempt of an event. */
export function recoveryItemId(eventId: string, recoveryId: string): string {
  return `${eventId}.${recoveryId}`;
}

/** Whether a queue item's id is a recovery item's (event ids are UUIDs: no dot). */
export function isRecoveryItemId(id: string): boolean {
  return id.includes('.');
}

/** The route as carried on the wire (an outbox column, a NATS header): compact JSON. */
export function encodeRoute(r: EventRoute): string {
  return JSON.stringify(r);
}

const isEntity = (v: unknown): v is RouteEntity | null =>
  v === null ||
  (typeof v === 'object' &&
    typeof (v as RouteEntity).id === 'string' &&
    ((v as RouteEntity).labels === null || (typeof (v as RouteEntity).labels === 'object' && !Array.isArray((v as RouteEntity).labels))));

/** The route of a wire string; null when it is not one. */
export function decodeRoute(text: string): EventRoute | null {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return null;
  }
  if (!v || typeof v !== 'object') return null;
  const r = v as EventRoute;
  if (typeof r.org !== 'string' || typeof r.type !== 'string' || typeof r.resource !== 'string') return null;
  if (typeof r.op !== 'string' || typeof r.event !== 'string' || typeof r.rev !== 'number') return null;
  if (!isEntity(r.install) || !isEntity(r.component) || !isEntity(r.action)) return null;
  if (r.not_to !== undefined && typeof r.not_to !== 'string') return null;
  if (r.key !== undefined && typeof r.key !== 'string') return null;
  if (r.recovery !== undefined) {
    const x = r.recovery as Partial<RouteRecovery> | null;
    if (!x || typeof x !== 'object' || typeof x.id !== 'string' || typeof x.webhook !== 'string' || typeof x.event_id !== 'string')
      return null;
  }
  return r;
}
