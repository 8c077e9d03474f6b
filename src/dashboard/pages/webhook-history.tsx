// A webhook's delivery history on its page (CONTRACT 4.5): its attempts, newest first (all, or the
// failed ones only), each with "Resend", and the "Recover since…" form. Rendered by webhooks.tsx;
// the forms post to the routes of history.tsx.
import type { AppContext } from '../../context.ts';
import { may } from '../changes.ts';
import type { ErrorDetail } from '../../domain/errors.ts';
import { listAttempts, type AttemptView } from '../../services/history.ts';
import type { WebhookView } from '../../services/webhooks.ts';
import type { Paths } from '../paths.ts';
import { csrfOf } from '../render.tsx';
import type { DashContext } from '../session.ts';
import { Csrf, Errors, ScopeNote, Section, StackTable, StatusBadge, Time } from '../ui.tsx';

export const ATTEMPTS_PAGE = 25;

/** The recover form's values as typed (and what was wrong with them). */
export interface RecoverFormState {
  since: string;
  until: string;
  only_failed: boolean;
  errors?: ErrorDetail[];
}

export const EMPTY_RECOVER: RecoverFormState = { since: '', until: '', only_failed: true };

/** Which attempt made it: the automatic one, a recovery (linked to its progress), or a resend. */
export const AttemptVia = ({ a, webhookId, paths }: { a: AttemptView; webhookId: string; paths: Paths }) =>
  a.recovery_id === null ? (
    <span class="muted">automatic</span>
  ) : a.recovery_id === 'resend' ? (
    <>resend</>
  ) : (
    <>
      recovery <a href={paths.recovery(webhookId, a.recovery_id)}>{a.recovery_id}</a>
    </>
  );

/** Header lines as sent or received, `name: value` each. */
const HeaderLines = ({ headers, label }: { headers: Record<string, string>; label: string }) => (
  <pre class="json exchange-headers" aria-label={label} tabindex={0}>
    {Object.entries(headers)
      .map(([k, v]) => `${k}: ${v}`)
      .join('\n')}
  </pre>
);

/**
 * What an attempt sent and what the receiver answered (CONTRACT 4.5): the request headers
 * (signatures cut to 8 characters), the response status, headers and first 4 KiB of its body, in a
 * disclosure; the text is escaped as any text of a page. Nothing for attempts that kept none.
 */
export const AttemptExchange = ({ a }: { a: AttemptView }) => {
  if (!a.request && !a.response) return null;
  const r = a.response;
  return (
    <details class="attempt-exchange">
      <summary>{r ? 'Request & response' : 'Request'}</summary>
      {a.request ? (
        <>
          <h3 class="exchange-part">Request headers</h3>
          <HeaderLines headers={a.request.headers} label="Request headers" />
        </>
      ) : null}
      {r ? (
        <>
          <h3 class="exchange-part">
            Response <span class="response-status">{r.status}</span>
          </h3>
          <HeaderLines headers={r.headers} label="Response headers" />
          {r.headers_truncated ? <p class="hint">Headers past 8 KiB not kept.</p> : null}
          <h3 class="exchange-part">
            Response body
            {r.body_encoding === 'base64' ? ' (base64: not UTF-8 text)' : ''}
            {r.body_truncated ? ' (first 4 KiB)' : ''}
          </h3>
          {r.body ? (
            <pre class="json response-body" aria-label="Response body" tabindex={0}>
              {r.body}
            </pre>
          ) : (
            <p class="muted">empty</p>
          )}
        </>
      ) : (
        <p class="muted">No response came.</p>
      )}
    </details>
  );
};

/** One attempt at a webhook, how it ended: the outcome badge, the HTTP status, the error. */
export const AttemptResultCells = ({ a }: { a: AttemptView }) => (
  <>
    <td data-label="Outcome">
      <StatusBadge status={a.outcome} />
    </td>
    <td data-label="HTTP status">
      {a.status_code ?? <span class="muted">no response</span>}
      <AttemptExchange a={a} />
    </td>
    <td data-label="Error" class={a.error ? 'step-error' : undefined}>
      {a.error ?? <span class="muted">—</span>}
    </td>
    <td data-label="Duration">{a.duration_ms} ms</td>
  </>
);

/** "Resend" one kept event to one webhook now; the result shows on the page it was sent from. */
export const ResendButton = ({
  c,
  webhookId,
  eventId,
  back,
  failedOnly,
  label,
}: {
  c: DashContext;
  webhookId: string;
  eventId: string;
  back: 'webhook' | 'event';
  failedOnly?: boolean;
  label: string;
}) =>
  !may(c, 'webhooks') ? null : (
    <form method="post" action={`${c.get('paths').webhook(webhookId)}/resend`} class="inline">
      <Csrf token={csrfOf(c)} />
      <input type="hidden" name="event_id" value={eventId} />
      <input type="hidden" name="back" value={back} />
      {failedOnly ? <input type="hidden" name="outcome" value="failure" /> : null}
      <button type="submit" class="secondary" aria-label={label}>
        Resend
      </button>
    </form>
  );

const AttemptTable = ({ c, w, attempts, failedOnly }: { c: DashContext; w: WebhookView; attempts: AttemptView[]; failedOnly: boolean }) => {
  const paths = c.get('paths');
  return (
    <StackTable
      columns={['Attempted', 'Event', 'Subject', 'Outcome', 'HTTP status', 'Error', 'Duration', 'Via', <span class="muted">Actions</span>]}
      items={attempts}
      id="attempts-table"
      row={(a) => (
        <tr class={`attempt attempt-${a.outcome}`} data-event-id={a.event_id}>
          <td data-label="Attempted">
            <Time iso={a.attempted_at} />
          </td>
          <td data-label="Event">
            {a.type}{' '}
            <a href={paths.event(a.event_id)} class="id">
              {a.event_id}
            </a>
          </td>
          <td data-label="Subject" class="id">
            {a.subject ?? <span class="muted">—</span>}
          </td>
          <AttemptResultCells a={a} />
          <td data-label="Via">
            <AttemptVia a={a} webhookId={w.webhook_id} paths={paths} />
          </td>
          <td>
            <ResendButton
              c={c}
              webhookId={w.webhook_id}
              eventId={a.event_id}
              back="webhook"
              failedOnly={failedOnly}
              label={`Resend event ${a.event_id}`}
            />
          </td>
        </tr>
      )}
    />
  );
};

/** The webhook page's "Attempts" and "Recover since…" sections. */
export const WebhookHistory = ({ c, ctx, w, recover }: { c: DashContext; ctx: AppContext; w: WebhookView; recover?: RecoverFormState }) => {
  const paths = c.get('paths');
  const failedOnly = c.req.method === 'GET' && c.req.query('outcome') === 'failure';
  const after = c.req.method === 'GET' ? c.req.query('after') || undefined : undefined;
  const page = listAttempts(ctx, c.req.param('org') ?? '', w.webhook_id, {
    limit: ATTEMPTS_PAGE,
    after,
    include: 'request,response',
    ...(failedOnly ? { outcome: 'failure' } : {}),
  });
  const base = paths.webhook(w.webhook_id);
  const filter = failedOnly ? 'outcome=failure&' : '';
  const r = recover ?? EMPTY_RECOVER;
  return (
    <>
      <Section headingId="h-attempts" id="attempts" title="Attempts">
        <nav aria-label="Attempts shown" class="actions">
          <a href={`${base}#attempts`} aria-current={failedOnly ? undefined : 'true'}>
            All attempts
          </a>
          <a href={`${base}?outcome=failure#attempts`} aria-current={failedOnly ? 'true' : undefined}>
            Failed only
          </a>
        </nav>
        <p class="hint">Newest first; kept as long as the events (--event-retention).</p>
        {page.data.length ? (
          <AttemptTable c={c} w={w} attempts={page.data} failedOnly={failedOnly} />
        ) : (
          <p class="muted" id="no-attempts">
            {failedOnly ? 'No failed attempts kept.' : 'No attempts kept yet.'}
          </p>
        )}
        {after || page.next_cursor ? (
          <p class="actions">
            {after ? <a href={`${base}${failedOnly ? '?outcome=failure' : ''}#attempts`}>Newest attempts</a> : null}
            {page.next_cursor ? (
              <a href={`${base}?${filter}after=${encodeURIComponent(page.next_cursor)}#attempts`} rel="next">
                Older attempts
              </a>
            ) : null}
          </p>
        ) : null}
      </Section>
      <Section headingId="h-recover" id="recover" title="Recover since…">
        <p class="hint">
          One new attempt at this webhook alone for each kept event of the window that it matches now. Each carries the event's own body and
          id and the header X-Svc-Recovery.
        </p>
        {may(c, 'webhooks') ? (
          <form method="post" action={`${base}/recover`} class="stack">
            <Errors errors={r.errors} />
            <Csrf token={csrfOf(c)} />
            <div>
              <label for="recover_since">Since</label>
              <input
                type="text"
                id="recover_since"
                name="since"
                value={r.since}
                required
                maxlength={64}
                placeholder="2h"
                aria-describedby="recover-time-hint"
              />
            </div>
            <div>
              <label for="recover_until">Until (optional)</label>
              <input type="text" id="recover_until" name="until" value={r.until} maxlength={64} aria-describedby="recover-time-hint" />
              <p class="hint" id="recover-time-hint">
                An ISO 8601 time (2026-01-31T08:00:00Z) or a duration back from now (30m, 2h, 7d).
              </p>
            </div>
            <label class="check">
              <input type="checkbox" name="only_failed" value="1" checked={r.only_failed} /> Only the events that never got through to it
              (failed or missed)
            </label>
            <div class="actions">
              <button type="submit">Recover</button>
            </div>
          </form>
        ) : (
          <ScopeNote have={c.get('session')?.scope ?? 'read'} need="webhooks" what="Recovering" />
        )}
      </Section>
    </>
  );
};
