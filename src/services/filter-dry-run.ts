// Dry runs of filters and recipients of an event (CONTRACT 10.2, issue 54): what a subscription
// (interests, match, filter) would have received of a given event, a kept event, or a window of
// kept history, and which of the org's webhooks an event goes to now; each with what decided
// (`interests`, `match`, or the filter's clause path). The decision is the one dispatch makes: a
// WebhookSubscriber built from the subscription (src/dispatch/subscriber.ts), no second copy.
import type { AppContext } from '../context.ts';
import { InvalidError, NotFoundError } from '../domain/errors.ts';
import type { EventRoute, RouteEntity } from '../domain/event-route.ts';
import { decodeRoute } from '../domain/event-route.ts';
import type { EventFilter } from '../domain/event-filter.ts';
import { normalizeMatch, type Interests, type Match } from '../domain/subscription.ts';
import type { WebhookEntry } from '../domain/webhook-entry.ts';
import { ParsedEvent, WebhookSubscriber, type Verdict } from '../dispatch/subscriber.ts';
import { entryOf } from '../handoff/registry-replicator.ts';
import { getEvent, listEvents, type StoredEvent } from '../../store/history.ts';
import { entityLabels } from '../../store/installs.ts';
import { getWebhook, listWebhooks } from '../../store/webhooks.ts';
import { filterProblems } from './filter-paths.ts';
import { retentionMs, timeBound } from './history.ts';

/** CONTRACT 10.2: a window of history examines at most this many events (the oldest of it). */
export const DRY_RUN_MAX_EVENTS = 10_000;

/** Where the events of a dry run come from: one of them. */
export interface DryRunSource {
  /** a CloudEvent as delivered */
  event?: Record<string, unknown>;
  /** a kept event of the org */
  event_id?: string;
  /** a window of kept history */
  since?: string;
  until?: string;
}

export interface DryRunInput extends DryRunSource {
  filter?: EventFilter | null;
  interests?: Interests;
  match?: Match | null;
}

export interface DryRunResult {
  event_id: string;
  type: string;
  subject: string;
  matched: boolean;
  decided_by: string;
}

export interface DryRun {
  examined: number;
  matched: number;
  results: DryRunResult[];
}

/** One event to decide on: its route (what interests and match read) and its CloudEvent (what a filter reads). */
interface Examined {
  event_id: string;
  type: string;
  subject: string;
  route: EventRoute;
  event: ParsedEvent;
}

const keptSince = (ctx: AppContext): number => {
  const keep = retentionMs(ctx);
  return keep > 0 ? ctx.clock.now() - keep : Number.POSITIVE_INFINITY;
};

/** The subscription as dispatch would hold it; its filter checked as on write (400 naming the path). */
function subscriber(
  orgId: string,
  entry: Pick<WebhookEntry, 'interests' | 'match' | 'filter' | 'implicit_interests'>,
  id = '',
): WebhookSubscriber {
  if (entry.filter) {
    const details = filterProblems(entry.filter, entry.interests, entry.implicit_interests === true);
    if (details.length) throw new InvalidError(`invalid request: ${details[0].path}: ${details[0].message}`, details);
  }
  return new WebhookSubscriber({
    webhook_id: id,
    org_id: orgId,
    url: '',
    secret: null,
    previous_secret: null,
    previous_secret_expires_at: null,
    ...entry,
    ...(entry.filter && Object.keys(entry.filter).length ? { filter: entry.filter } : { filter: undefined }),
  });
}

const fromStored = (e: StoredEvent): Examined | null => {
  const route = decodeRoute(e.route);
  return route && { event_id: e.event_id, type: e.type, subject: e.subject, route, event: new ParsedEvent(e.body) };
};

const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);
const obj = (v: unknown): Record<string, unknown> =>
  v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : {};

/**
 * The route of a CloudEvent given as is: a kept event's own route when its id is one; otherwise
 * its classification read off its `interests` slugs (CONTRACT 6.2) and its entities off its data
 * (the owner install, the step's component, the action), their labels as the org has them now.
 */
function routeOfGiven(ctx: AppContext, orgId: string, ev: Record<string, unknown>): EventRoute {
  const kept = str(ev.id) && getEvent(ctx.db, orgId, ev.id as string, keptSince(ctx));
  const keptRoute = kept ? decodeRoute(kept.route) : null;
  if (keptRoute) return keptRoute;
  const slugs = Array.isArray(ev.interests) ? ev.interests.filter((s): s is string => typeof s === 'string') : [];
  const slug = (prefix: string) => slugs.find((s) => s.startsWith(prefix))?.slice(prefix.length) ?? '';
  const resource = slug('resource:');
  const op = slug('op:').slice(resource.length + 1);
  const data = obj(ev.data);
  const workflow = obj(data.workflow);
  const install =
    str(data.install_id) ?? str(obj(data.install).id) ?? (workflow.owner_type === 'installs' ? str(workflow.owner_id) : undefined);
  const component = str(obj(data.step).component_id) ?? str(data.component_id) ?? str(obj(data.component).id);
  const action = str(obj(data.action).id);
  const entity = (kind: 'install' | 'component' | 'action', id: string | undefined): RouteEntity | null =>
    id === undefined ? null : { id, labels: entityLabels(ctx.db, orgId, kind, id) };
  return {
    org: orgId,
    type: str(ev.type) ?? '',
    resource,
    op,
    event: slug('event:'),
    install: entity('install', install),
    component: entity('component', component),
    action: entity('action', action),
    rev: 0,
  };
}

/** The events of the source named (exactly one of event, event_id, since/until). */
function examinedOf(ctx: AppContext, orgId: string, src: DryRunSource): Examined[] {
  const named = [src.event !== undefined, src.event_id !== undefined, src.since !== undefined].filter(Boolean).length;
  if (named !== 1 || (src.until !== undefined && src.since === undefined)) {
    const message = 'name exactly one source: event (a CloudEvent), event_id, or since (with until)';
    throw new InvalidError(`invalid request: ${message}`, [{ path: '(body)', message }]);
  }
  if (src.event !== undefined) {
    const ev = src.event;
    return [
      {
        event_id: str(ev.id) ?? '',
        type: str(ev.type) ?? '',
        subject: str(ev.subject) ?? '',
        route: routeOfGiven(ctx, orgId, ev),
        event: ParsedEvent.of(ev),
      },
    ];
  }
  if (src.event_id !== undefined) {
    const e = getEvent(ctx.db, orgId, src.event_id, keptSince(ctx));
    const x = e && fromStored(e);
    if (!x) throw new NotFoundError('event', src.event_id);
    return [x];
  }
  const now = ctx.clock.now();
  const since = timeBound(src.since as string, now, 'since');
  const until = src.until !== undefined ? timeBound(src.until, now, 'until') : null;
  const rows = listEvents(ctx.db, {
    orgId,
    sinceMs: Math.max(since, Math.min(keptSince(ctx), Number.MAX_SAFE_INTEGER)),
    untilMs: until,
    type: null,
    subjectPrefix: null,
    afterSeq: 0,
    limit: DRY_RUN_MAX_EVENTS,
  });
  const out: Examined[] = [];
  for (const r of rows) {
    const x = fromStored(r);
    if (x) out.push(x);
  }
  return out;
}

function decide(sub: WebhookSubscriber, events: Examined[]): DryRun {
  let matched = 0;
  const results = events.map((e): DryRunResult => {
    const v = sub.verdict(e.route, e.event);
    if (v.matched) matched++;
    return { event_id: e.event_id, type: e.type, subject: e.subject, matched: v.matched, decided_by: v.decided_by };
  });
  return { examined: results.length, matched, results };
}

/** POST …/webhooks/test-filter: omitted interests and match are all_events and org-wide. */
export function testFilter(ctx: AppContext, orgId: string, input: DryRunInput): DryRun {
  const sub = subscriber(orgId, {
    interests: input.interests ?? { all_events: true },
    match: normalizeMatch(input.match ?? null),
    filter: input.filter ?? undefined,
  });
  return decide(sub, examinedOf(ctx, orgId, input));
}

/** Check a dry run's request before it runs (400 or 404 before the work). */
export function checkTestFilter(ctx: AppContext, orgId: string, input: DryRunInput, webhookId?: string): void {
  if (webhookId !== undefined && !getWebhook(ctx.db, orgId, webhookId)) throw new NotFoundError('webhook', webhookId);
  if (input.filter) subscriber(orgId, { interests: input.interests ?? { all_events: true }, match: null, filter: input.filter });
}

/**
 * POST …/webhooks/{id}/test-filter: the webhook's own subscription as dispatch holds it; a
 * `filter` given tries that one in place of its own (the form's dry run before saving).
 */
export function testWebhookFilter(
  ctx: AppContext,
  orgId: string,
  webhookId: string,
  input: DryRunSource & { filter?: EventFilter | null },
): DryRun {
  const w = getWebhook(ctx.db, orgId, webhookId);
  if (!w) throw new NotFoundError('webhook', webhookId);
  const entry = entryOf(w);
  const filter = 'filter' in input ? (input.filter ?? undefined) : entry.filter;
  return decide(subscriber(orgId, { ...entry, filter }, webhookId), examinedOf(ctx, orgId, input));
}

export interface Recipient extends Verdict {
  webhook_id: string;
}

/** GET /v1/events/{id}/recipients: every webhook of the org as it is now, newest first. */
export function eventRecipients(ctx: AppContext, orgId: string, eventId: string): Recipient[] {
  const e = getEvent(ctx.db, orgId, eventId, keptSince(ctx));
  const x = e && fromStored(e);
  if (!x) throw new NotFoundError('event', eventId);
  return listWebhooks(ctx.db, orgId).map((w) => {
    const sub = new WebhookSubscriber(entryOf(w));
    return { webhook_id: w.webhook_id, ...sub.verdict(x.route, x.event) };
  });
}
