// Event history in the dashboard (CONTRACT 4.5): the org's kept events (filters, pages), an event's
// page (its CloudEvent JSON and its attempts per webhook, each with "Resend"), and the webhook
// page's forms: "Recover since…" (then the recovery's progress, refreshing while it runs) and
// "Resend" (its result shown like a test event's). The same service functions as the API.
import type { Hono } from 'hono';
import type { AppContext } from '../../context.ts';
import { apiOp, change, refused } from '../changes.ts';
import { changedBy } from '../../services/audit.ts';
import { ConflictError, InvalidError, LimitExceededError, type ErrorDetail } from '../../domain/errors.ts';
import {
  getEventAttempts,
  getRecovery,
  listEvents,
  recoveryAnswer,
  resendable,
  resendEvent,
  startRecovery,
  type CloudEventJson,
  type EventListInput,
} from '../../services/history.ts';
import { getWebhook, listWebhooks } from '../../services/webhooks.ts';
import { eventRecipients } from '../../services/filter-dry-run.ts';
import { eventListQuerySchema } from '../../schemas/events.ts';
import { recoverBodySchema, resendBodySchema } from '../../schemas/webhooks.ts';
import { issuesToDetails } from '../../http/validation.ts';
import { errorPage, render } from '../render.tsx';
import { FilterField, FilterForm, oldestFirst } from '../filters.tsx';
import { flash, flashAttempt, type DashContext, type DashEnv } from '../session.ts';
import {
  ActorName,
  DetailsSection,
  Errors,
  FactLine,
  Json,
  Section,
  StackTable,
  StatusBadge,
  Time,
  CodeFact,
  TimeFact,
  Heading,
} from '../ui.tsx';
import { formStateOf } from '../webhook-form.ts';
import { showForm } from './webhooks.tsx';
import { AttemptResultCells, AttemptVia, ResendButton, type RecoverFormState } from './webhook-history.tsx';

export const EVENTS_PAGE = 50;
const REFRESH_SECONDS = 3;
const FILTERS = ['since', 'until', 'type', 'subject_prefix'] as const;

type Filters = Partial<Record<(typeof FILTERS)[number], string>>;

/** The filters as given in the query (empty fields dropped). */
function filtersOf(c: DashContext): Filters {
  const out: Filters = {};
  for (const k of FILTERS) {
    const v = c.req.query(k)?.trim();
    if (v) out[k] = v;
  }
  return out;
}

const queryOf = (f: Record<string, string | undefined>) => {
  const q = new URLSearchParams(Object.entries(f).filter((e): e is [string, string] => !!e[1])).toString();
  return q ? `?${q}` : '';
};

const EventFilters = ({ c, f }: { c: DashContext; f: Filters }) => (
  <FilterForm c={c} action={c.get('paths').events} label="Filter events">
    <FilterField id="f_since" label="Since" name="since" value={f.since} maxlength={64} placeholder="2h" describedBy="f-time-hint" />
    <FilterField id="f_until" label="Until" name="until" value={f.until} maxlength={64} describedBy="f-time-hint">
      <p class="hint" id="f-time-hint">
        An ISO 8601 time (2026-01-31T08:00:00Z) or a duration back from now (30m, 2h, 7d). Empty: every kept event.
      </p>
    </FilterField>
    <FilterField id="f_type" label="Type" name="type" value={f.type} maxlength={200} placeholder="com.svc.workflow.lifecycle.v1" />
    <FilterField
      id="f_subject_prefix"
      label="Subject prefix"
      name="subject_prefix"
      value={f.subject_prefix}
      maxlength={1000}
      placeholder={`${c.req.param('org') ?? ''}/workflow/…`}
    />
  </FilterForm>
);

const EventTable = ({ c, events }: { c: DashContext; events: CloudEventJson[] }) => (
  <StackTable
    caption={`Kept events, ${oldestFirst(c) ? 'oldest' : 'newest'} first`}
    columns={['Time', 'Type', 'Subject', 'Event ID']}
    items={events}
    id="events-table"
    row={(e) => (
      <tr class="event" data-event-id={e.id}>
        <td data-label="Time">
          <Time iso={typeof e.time === 'string' ? e.time : null} />
        </td>
        <td data-label="Type">{e.type}</td>
        <td data-label="Subject" class="id">
          {typeof e.subject === 'string' ? e.subject : <span class="muted">—</span>}
        </td>
        <td data-label="Event ID">
          <a href={c.get('paths').event(e.id)} class="id">
            {e.id}
          </a>
        </td>
      </tr>
    )}
  />
);

function eventsPage(c: DashContext, ctx: AppContext) {
  const f = filtersOf(c);
  const after = c.req.query('after') || undefined;
  const limit = c.req.query('limit') || undefined;
  let errors: ErrorDetail[] | undefined;
  let page: ReturnType<typeof listEvents> | undefined;
  const parsed = eventListQuerySchema.safeParse({ ...f, ...(after ? { after } : {}), ...(limit ? { limit } : {}) });
  if (!parsed.success) errors = issuesToDetails(parsed.error.issues);
  else {
    const q: EventListInput = { ...parsed.data, limit: parsed.data.limit ?? EVENTS_PAGE, newest_first: !oldestFirst(c) };
    try {
      page = listEvents(ctx, c.req.param('org') ?? '', q);
    } catch (err) {
      if (!(err instanceof InvalidError)) throw err;
      errors = err.details ?? [{ path: '(query)', message: err.message }];
    }
  }
  const paths = c.get('paths');
  const oldest = oldestFirst(c);
  /** a quick range: the events since `t` ago, in this order */
  const since = (t: string) => `${paths.events}${queryOf({ since: t, ...(oldest ? { order: 'oldest' } : {}) })}`;
  const keep = { ...f, ...(limit ? { limit } : {}), ...(oldest ? { order: 'oldest' } : {}) };
  // the other order, from its first page, with the same filters
  const turned = queryOf({ ...f, ...(limit ? { limit } : {}), ...(oldest ? {} : { order: 'oldest' }) });
  return render(
    c,
    {
      title: 'Events',
      current: 'events',
      children: (
        <>
          <h1>Events</h1>
          <p class="hint">
            Every event emitted in this org (not test events), {oldest ? 'oldest' : 'newest'} first, kept for the event retention.{' '}
            <a href={`${paths.events}${turned}`} id="events-order">
              {oldest ? 'Newest first' : 'Oldest first'}
            </a>
            . Quick ranges: <a href={since('1h')}>last hour</a> · <a href={since('24h')}>last 24 hours</a>.
          </p>
          <section aria-label="Filters">
            <EventFilters c={c} f={f} />
          </section>
          <Section headingId="h-events" title="Kept events">
            <Errors errors={errors} title="These filters are not valid:" />
            {page ? (
              page.data.length ? (
                <EventTable c={c} events={page.data} />
              ) : (
                <p class="muted" id="no-events">
                  No kept events {Object.keys(f).length ? 'match these filters' : 'yet'}.
                </p>
              )
            ) : null}
            {after || page?.next_cursor ? (
              <p class="actions">
                {after ? <a href={`${paths.events}${queryOf(keep)}`}>First page</a> : null}
                {page?.next_cursor ? (
                  <a href={`${paths.events}${queryOf({ ...keep, after: page.next_cursor })}`} rel="next">
                    Next page
                  </a>
                ) : null}
              </p>
            ) : null}
          </Section>
        </>
      ),
    },
    errors ? 400 : 200,
  );
}

function eventPage(c: DashContext, ctx: AppContext) {
  const orgId = c.req.param('org') ?? '';
  const { event, webhooks, key } = getEventAttempts(ctx, orgId, c.req.param('id') ?? '');
  const paths = c.get('paths');
  // which webhooks it goes to now (CONTRACT 10.2 recipients), by URL
  const urls = new Map(listWebhooks(ctx, orgId).map((w) => [w.webhook_id, w.webhook_url]));
  const recipients = eventRecipients(ctx, orgId, event.id);
  return render(c, {
    title: `Event ${event.type}`,
    current: 'events',
    children: (
      <>
        <p class="muted">
          <a href={paths.events}>Events</a> /
        </p>
        <Heading title="Event" sub={event.type} />
        <DetailsSection headingId="h-event">
          <CodeFact term="Event ID" value={event.id} />
          <FactLine term="Type">{event.type}</FactLine>
          <dt>Subject</dt>
          <dd class="id">{typeof event.subject === 'string' ? event.subject : '—'}</dd>
          <TimeFact term="Time" iso={typeof event.time === 'string' ? event.time : null} />
          <dt>Source</dt>
          <dd class="id">{event.source}</dd>
          {key ? (
            <>
              <dt>Ordering key</dt>
              <dd class="id" id="event-order-key">
                {key.order_key}
              </dd>
              <dt>Sequence</dt>
              <dd id="event-sequence">
                {key.sequence}{' '}
                {key.previous ? (
                  <a href={paths.event(key.previous)} rel="prev" id="event-previous">
                    ← previous ({key.sequence - 1})
                  </a>
                ) : null}{' '}
                {key.next ? (
                  <a href={paths.event(key.next)} rel="next" id="event-next">
                    next ({key.sequence + 1}) →
                  </a>
                ) : null}
              </dd>
            </>
          ) : null}
        </DetailsSection>
        <Section headingId="h-event-attempts" id="event-attempts" title="Attempts per webhook">
          {webhooks.length ? (
            webhooks.map((w) => (
              <div class="card" data-webhook-id={w.webhook_id}>
                <h3>
                  <a href={paths.webhook(w.webhook_id)}>{w.webhook_url}</a>
                </h3>
                <StackTable
                  columns={['Attempted', 'Outcome', 'HTTP status', 'Error', 'Duration', 'Via']}
                  items={w.attempts}
                  caption={`Attempts of this event at ${w.webhook_url}, newest first`}
                  row={(a) => (
                    <tr class={`attempt attempt-${a.outcome}`}>
                      <td data-label="Attempted">
                        <Time iso={a.attempted_at} />
                      </td>
                      <AttemptResultCells a={a} />
                      <td data-label="Via">
                        <AttemptVia a={a} webhookId={w.webhook_id} paths={paths} />
                      </td>
                    </tr>
                  )}
                />
                <p class="actions">
                  <ResendButton c={c} webhookId={w.webhook_id} eventId={event.id} back="event" label={`Resend to ${w.webhook_url}`} />
                </p>
              </div>
            ))
          ) : (
            <p class="muted">No webhook has had an attempt of this event.</p>
          )}
        </Section>
        <Section headingId="h-event-recipients" id="event-recipients" title="Recipients now">
          <p class="hint">Whether each webhook's interests, scope and filter admit this event as they are now, and what decided.</p>
          <StackTable
            columns={['Webhook', 'Gets it', 'Decided by']}
            items={recipients}
            empty="No webhooks."
            caption="Which webhooks this event goes to now"
            row={(r) => (
              <tr class={r.matched ? 'recipient recipient-yes' : 'recipient recipient-no'} data-webhook-id={r.webhook_id}>
                <td data-label="Webhook">
                  <a href={paths.webhook(r.webhook_id)}>{urls.get(r.webhook_id) ?? r.webhook_id}</a>
                </td>
                <td data-label="Gets it">{r.matched ? 'yes' : 'no'}</td>
                <td data-label="Decided by">
                  <code>{r.decided_by}</code>
                </td>
              </tr>
            )}
          />
        </Section>
        <Section headingId="h-event-json" title="CloudEvent">
          <p class="hint">Exactly as delivered.</p>
          <Json value={event} label="CloudEvent JSON" />
        </Section>
      </>
    ),
  });
}

async function textFields(c: DashContext): Promise<Record<string, string>> {
  const body = await c.req.parseBody();
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(body)) if (typeof v === 'string') out[k] = v;
  return out;
}

export function registerHistory(r: Hono<DashEnv>, ctx: AppContext) {
  r.get('/:org/events', (c) => eventsPage(c, ctx));
  r.get('/:org/events/:id', (c) => eventPage(c, ctx));
  r.post('/:org/webhooks/:id/recover', (c) => recoverPost(c, ctx));
  r.get('/:org/webhooks/:id/recoveries/:rid', (c) => recoveryPage(c, ctx));
  r.post('/:org/webhooks/:id/resend', (c) => resendPost(c, ctx));
}

/** "Recover since…": start a recovery, then its page; the form again with the errors when refused. */
async function recoverPost(c: DashContext, ctx: AppContext) {
  const orgId = c.req.param('org') ?? '';
  const w = getWebhook(ctx, orgId, c.req.param('id') ?? '');
  const form = await textFields(c);
  const state: RecoverFormState = {
    since: (form.since ?? '').trim(),
    until: (form.until ?? '').trim(),
    only_failed: form.only_failed === '1',
  };
  const again = (errors: ErrorDetail[], status: 400 | 409 = 400) =>
    showForm(c, { state: formStateOf(w), webhook: w, ctx, recover: { ...state, errors } }, status);
  const parsed = recoverBodySchema.safeParse({
    since: state.since,
    ...(state.until ? { until: state.until } : {}),
    only_failed: state.only_failed,
  });
  if (!parsed.success) {
    refused(c, ctx, apiOp('recoverWebhook'), 400);
    return again(issuesToDetails(parsed.error.issues));
  }
  let started: { recovery_id: string; events: number };
  try {
    const kept = change(c, ctx, apiOp('recoverWebhook'), { idOf: (x) => x.recovery_id, status: 202 }, () =>
      startRecovery(ctx, orgId, w.webhook_id, parsed.data),
    );
    started = await recoveryAnswer(ctx, orgId, w.webhook_id, kept.recovery_id);
  } catch (err) {
    if (err instanceof InvalidError) return again(err.details ?? [{ path: '(body)', message: err.message }]);
    // a recovery of this webhook still running, or the org's running recoveries at their limit (CONTRACT 4.5)
    if (err instanceof ConflictError || err instanceof LimitExceededError) return again([{ path: '(body)', message: err.message }], 409);
    throw err;
  }
  flash(c, {
    kind: 'ok',
    text: `Recovery ${started.recovery_id} started: ${started.events} event(s) to send again to ${w.webhook_url}.`,
    details: [
      ['Recovery ID', started.recovery_id],
      ['Events', String(started.events)],
    ],
  });
  return c.redirect(c.get('paths').recovery(w.webhook_id, started.recovery_id), 303);
}

/** A recovery's progress, refreshing while it runs. */
function recoveryPage(c: DashContext, ctx: AppContext) {
  const orgId = c.req.param('org') ?? '';
  const w = getWebhook(ctx, orgId, c.req.param('id') ?? '');
  const rec = getRecovery(ctx, orgId, w.webhook_id, c.req.param('rid') ?? '');
  const startedBy = changedBy(ctx, orgId, [rec.recovery_id], ['webhooks.recover']).get(rec.recovery_id);
  const paths = c.get('paths');
  const running = rec.state === 'running';
  return render(c, {
    title: `Recovery ${rec.recovery_id}`,
    current: 'webhooks',
    refresh: running ? REFRESH_SECONDS : undefined,
    children: (
      <>
        <p class="muted">
          <a href={paths.webhooks}>Webhooks</a> / <a href={paths.webhook(w.webhook_id)}>{w.webhook_url}</a> /
        </p>
        <Heading title="Recovery" sub={rec.recovery_id} />
        <Section headingId="h-recovery" title="Progress">
          <dl class="facts" id="recovery-status">
            <FactLine term="State" id="recovery-state">
              <StatusBadge status={rec.state} />
            </FactLine>
            {(
              [
                ['Events', 'recovery-events', rec.events],
                ['Attempted', 'recovery-attempted', rec.attempted],
                ['Succeeded', 'recovery-succeeded', rec.succeeded],
                ['Failed', 'recovery-failed', rec.failed],
              ] as const
            ).map(([term, id, n]) => (
              <FactLine term={term} id={id}>
                {n}
              </FactLine>
            ))}
            {startedBy ? (
              <FactLine term="Started by" id="recovery-started-by">
                <ActorName actor={startedBy.actor} />
              </FactLine>
            ) : null}
          </dl>
          <p>
            <label for="recovery-progress">
              Attempted {rec.attempted} of {rec.events}
            </label>
            <progress id="recovery-progress" max={String(Math.max(rec.events, 1))} value={String(rec.events ? rec.attempted : 1)}>
              {rec.attempted} of {rec.events}
            </progress>
          </p>
          <p class="hint">
            Each attempt carries the header X-Svc-Recovery: {rec.recovery_id}. Its outcomes are in the webhook's{' '}
            <a href={`${paths.webhook(w.webhook_id)}#attempts`}>attempts</a>.
          </p>
        </Section>
      </>
    ),
  });
}

/** "Resend": the event sent again to the webhook, its result flashed on the page it came from. */
async function resendPost(c: DashContext, ctx: AppContext) {
  const orgId = c.req.param('org') ?? '';
  const w = getWebhook(ctx, orgId, c.req.param('id') ?? '');
  const form = await textFields(c);
  const parsed = resendBodySchema.safeParse({ event_id: form.event_id ?? '' });
  if (!parsed.success) {
    refused(c, ctx, apiOp('resendEvent'), 400, w.webhook_id);
    return errorPage(c, 400, 'Request refused', 'No event to resend was named.');
  }
  const eventId = parsed.data.event_id;
  change(c, ctx, apiOp('resendEvent'), { id: w.webhook_id }, () => resendable(ctx, orgId, w.webhook_id, eventId));
  const res = await resendEvent(ctx, orgId, w.webhook_id, eventId);
  flashAttempt(
    c,
    res,
    {
      ok: (http) => `Event resent to ${w.webhook_url}: delivered, ${http} in ${res.duration_ms} ms.`,
      failed: (why) => `Event resent to ${w.webhook_url} was not delivered: ${why}.`,
    },
    [['Event', eventId]],
  );
  const paths = c.get('paths');
  const back =
    form.back === 'event'
      ? paths.event(eventId)
      : `${paths.webhook(w.webhook_id)}${form.outcome === 'failure' ? '?outcome=failure' : ''}#attempts`;
  return c.redirect(back, 303);
}
