// Durable ingest's late refusals in the dashboard (CONTRACT 9): the org's facts that svc
// acknowledged and the engine refused when it applied them, newest first, a page at a time, each
// with its fact as received in a <details>. The same service as GET /v1/ingest/rejections.
import type { Hono } from 'hono';
import type { AppContext } from '../../context.ts';
import { InvalidError, type ErrorDetail } from '../../domain/errors.ts';
import { issuesToDetails } from '../../http/validation.ts';
import { ingestRejectionListQuerySchema } from '../../schemas/ingest.ts';
import { listIngestRejections, type IngestRejectionView } from '../../services/ingest-rejections.ts';
import { render } from '../render.tsx';
import type { DashContext, DashEnv } from '../session.ts';
import { Errors, Section, StackTable, Time } from '../ui.tsx';

export const REJECTIONS_PAGE = 50;
/** The fact's first characters, shown on its <details> summary. */
const PREVIEW = 48;
/** The characters of a fact a page shows at most. */
const FACT_SHOWN = 16 * 1024;

const preview = (fact: unknown) => {
  const text = typeof fact === 'string' ? fact : JSON.stringify(fact);
  return text.length > PREVIEW ? `${text.slice(0, PREVIEW - 1)}…` : text;
};

/**
 * The fact as received: pretty JSON when it parsed, else its text as it came; its first FACT_SHOWN
 * characters (a fact may be up to the ingest size limit, and a page shows 50 of them).
 */
const Fact = ({ fact }: { fact: unknown }) => {
  const text = typeof fact === 'string' ? fact : JSON.stringify(fact, null, 2);
  const cut = text.length > FACT_SHOWN;
  return (
    <details class="fact">
      <summary>
        <code>{preview(fact)}</code>
      </summary>
      <pre class="json" aria-label={typeof fact === 'string' ? 'the fact as received (not JSON)' : 'the fact as received'} tabindex={0}>
        {cut ? text.slice(0, FACT_SHOWN) : text}
      </pre>
      {cut ? (
        <p class="hint">
          Its first {FACT_SHOWN / 1024} KiB of {Math.ceil(text.length / 1024)} KiB; <code>svc ingest rejections --json</code> shows all of
          it.
        </p>
      ) : null}
    </details>
  );
};

const RejectionTable = ({ rows }: { rows: IngestRejectionView[] }) => (
  <StackTable
    id="rejections-table"
    caption="Refused facts, newest first"
    columns={['Received', 'Subject', 'Error', 'Fact']}
    items={rows}
    row={(r) => (
      <tr class="rejection">
        <td data-label="Received">
          <Time iso={r.received_at} />
        </td>
        <td data-label="Subject" class="id">
          {r.subject}
        </td>
        <td data-label="Error">{r.error}</td>
        <td data-label="Fact">
          <Fact fact={r.fact} />
        </td>
      </tr>
    )}
  />
);

function rejectionsPage(c: DashContext, ctx: AppContext) {
  const after = c.req.query('after') || undefined;
  let errors: ErrorDetail[] | undefined;
  let page: ReturnType<typeof listIngestRejections> | undefined;
  const parsed = ingestRejectionListQuerySchema.safeParse(after ? { after } : {});
  if (!parsed.success) errors = issuesToDetails(parsed.error.issues);
  else {
    try {
      page = listIngestRejections(ctx, c.req.param('org') ?? '', { ...parsed.data, limit: REJECTIONS_PAGE });
    } catch (err) {
      if (!(err instanceof InvalidError)) throw err;
      errors = err.details ?? [{ path: '(query)', message: err.message }];
    }
  }
  const paths = c.get('paths');
  return render(
    c,
    {
      title: 'Ingest rejections',
      current: 'rejections',
      children: (
        <>
          <h1>Ingest rejections</h1>
          <p class="hint">
            Facts that producers sent and svc acknowledged, which the engine refused when it applied them (for example a workflow id that
            belongs to a workflow svc started). Newest first, kept for the event retention (at most the newest 10,000).
          </p>
          <Section headingId="h-rejections" title="Refused facts">
            <Errors errors={errors} title="This page link is not valid:" />
            {page ? (
              page.data.length ? (
                <RejectionTable rows={page.data} />
              ) : (
                <p class="muted" id="no-rejections">
                  No refused facts{after ? ' on this page' : ''}.
                </p>
              )
            ) : null}
            {after || page?.next_cursor ? (
              <p class="actions">
                {after ? <a href={paths.rejections}>First page</a> : null}
                {page?.next_cursor ? (
                  <a href={`${paths.rejections}?${new URLSearchParams({ after: page.next_cursor })}`} rel="next">
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

export function registerIngestRejections(r: Hono<DashEnv>, ctx: AppContext) {
  r.get('/:org/ingest/rejections', (c) => rejectionsPage(c, ctx));
}
