// The event catalog (CONTRACT 10.3): every type svc sends to a URL, with what it says, its
// subject's pattern, the URL of its JSON Schema (what each event carries as `dataschema`), an
// example of this org made by the code that makes the real events, and the schema itself. The same
// service as GET /v1/event-types.
import type { Hono } from 'hono';
import type { AppContext } from '../../context.ts';
import { EVENT_TYPES } from '../../events/catalog.ts';
import { eventTypeSchema, listEventTypes } from '../../services/event-types.ts';
import { exampleType, getWebhook, sendExample, type WebhookView } from '../../services/webhooks.ts';
import { apiOp, change, may } from '../changes.ts';
import { csrfOf, render } from '../render.tsx';
import { flashAttempt, type DashContext, type DashEnv } from '../session.ts';
import { Csrf, Json, LabeledSelect, Section, StackTable } from '../ui.tsx';

/**
 * A webhook page's "Send example" (CONTRACT 10.3 `POST …/examples`): one signed example of the
 * chosen type to this webhook alone, marked `svcexample`, never kept; the result shows like a ping's.
 */
export const ExampleForm = ({ c, w }: { c: DashContext; w: WebhookView }) =>
  !may(c, 'webhooks') ? null : (
    <form method="post" action={`${c.get('paths').webhook(w.webhook_id)}/examples`} class="inline" id="example-form">
      <Csrf token={csrfOf(c)} />
      <LabeledSelect id="example-type" label="Example of" name="type">
        {[...EVENT_TYPES.keys()].map((t) => (
          <option value={t}>{t}</option>
        ))}
      </LabeledSelect>
      <button type="submit" class="secondary">
        Send example
      </button>{' '}
      <span class="hint">
        The <a href={c.get('paths').eventTypes}>example</a> of that type, to this webhook alone, marked <code>svcexample</code>, never kept.
      </span>
    </form>
  );

/** The anchor of a type's section: its type with the dots made dashes (`com-svc-webhook-ping-v1`). */
const anchorOf = (type: string) => type.replace(/[^a-z0-9]+/gi, '-');

/** A catalog description, its `quoted` names as code (every other part of a split on backticks). */
const Described = ({ text }: { text: string }) => <>{text.split('`').map((part, i) => (i % 2 ? <code>{part}</code> : part))}</>;

export function registerEventTypes(r: Hono<DashEnv>, ctx: AppContext) {
  r.post('/:org/webhooks/:id/examples', async (c) => {
    const orgId = c.req.param('org');
    const w = getWebhook(ctx, orgId, c.req.param('id'));
    const type = String((await c.req.parseBody()).type ?? '');
    // recorded before the attempt (the type checked: 400 naming the known ones), as the API does
    change(c, ctx, apiOp('sendWebhookExample'), { id: w.webhook_id }, () => (exampleType(type), getWebhook(ctx, orgId, w.webhook_id)));
    const res = await sendExample(ctx, orgId, w.webhook_id, type);
    flashAttempt(c, res, {
      ok: (http) => `Example of ${type} delivered to ${w.webhook_url}: ${http} in ${res.duration_ms} ms.`,
      failed: (why) => `Example of ${type} to ${w.webhook_url} was not delivered: ${why}.`,
    });
    return c.redirect(c.get('paths').webhook(w.webhook_id), 303);
  });

  r.get('/:org/event-types', (c) => {
    const s = c.get('session')!;
    const types = listEventTypes(ctx, s.org_id);
    return render(c, {
      title: 'Event types',
      current: 'event-types',
      children: (
        <>
          <h1>Event types</h1>
          <p class="hint">
            Every type of CloudEvent svc sends to a URL. Each event carries <code>dataschema</code>: the URL of the JSON Schema (draft
            2020-12) of its whole CloudEvent, served without a token, to validate a body or generate types from. Send an example of a type
            to one webhook with <code>svc trigger TYPE --webhook ID</code> or <code>POST …/webhooks/ID/examples</code>: it is marked{' '}
            <code>svcexample: true</code> and never kept.
          </p>
          <Section headingId="h-types" title="Types">
            <StackTable
              id="event-types"
              caption="Event types"
              columns={['Type', 'Subject']}
              items={types}
              empty="No event types."
              row={(t) => (
                <tr>
                  <td data-label="Type">
                    <a href={`#${anchorOf(t.type)}`}>
                      <code>{t.type}</code>
                    </a>
                  </td>
                  <td data-label="Subject">
                    <code>{t.subject_pattern}</code>
                  </td>
                </tr>
              )}
            />
          </Section>
          {types.map((t) => (
            <Section headingId={`h-${anchorOf(t.type)}`} id={anchorOf(t.type)} title={<code>{t.type}</code>}>
              <p class="event-type-description">
                <Described text={t.description} />
              </p>
              <dl class="facts">
                <dt>Subject</dt>
                <dd>
                  <code>{t.subject_pattern}</code>
                </dd>
                <dt>Schema</dt>
                <dd>
                  <a href={t.schema_url}>
                    <code>{t.schema_url}</code>
                  </a>
                </dd>
              </dl>
              <details open={t === types[0]}>
                <summary>Example</summary>
                <Json value={t.example} label={`Example of ${t.type}`} />
              </details>
              <details>
                <summary>JSON Schema</summary>
                <Json value={eventTypeSchema(ctx, t.type)} label={`JSON Schema of ${t.type}`} />
              </details>
            </Section>
          ))}
        </>
      ),
    });
  });
}
