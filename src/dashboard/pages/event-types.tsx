// The event catalog (CONTRACT 10.3): every type svc sends to a URL, with what it says, its
// subject's pattern, the URL of its JSON Schema (what each event carries as `dataschema`), an
// example of this org made by the code that makes the real events, and the schema itself. The same
// service as GET /v1/event-types.
import type { Hono } from 'hono';
import type { AppContext } from '../../context.ts';
import { eventTypeSchema, listEventTypes } from '../../services/event-types.ts';
import { render } from '../render.tsx';
import type { DashEnv } from '../session.ts';
import { Json, Section, StackTable } from '../ui.tsx';

/** The anchor of a type's section: its type with the dots made dashes (`com-svc-webhook-ping-v1`). */
const anchorOf = (type: string) => type.replace(/[^a-z0-9]+/gi, '-');

/** A catalog description, its `quoted` names as code (every other part of a split on backticks). */
const Described = ({ text }: { text: string }) => <>{text.split('`').map((part, i) => (i % 2 ? <code>{part}</code> : part))}</>;

export function registerEventTypes(r: Hono<DashEnv>, ctx: AppContext) {
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
