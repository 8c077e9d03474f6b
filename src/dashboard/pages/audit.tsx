// The audit log (CONTRACT 2 "Scopes and actors"): who changed what, newest first (`?order=oldest`
// turns it, CONTRACT 7), filtered and paged like GET /v1/audit (the same service). Admin sessions only: others get 403, and no link to it.
import type { Hono } from 'hono';
import type { AppContext } from '../../context.ts';
import { ForbiddenError, InvalidError } from '../../domain/errors.ts';
import { listAudit, type AuditListInput, type AuditView } from '../../services/audit.ts';
import { auditListQuerySchema } from '../../schemas/audit.ts';
import { render } from '../render.tsx';
import { FilterField, FilterForm, oldestFirst } from '../filters.tsx';
import { may } from '../changes.ts';
import type { DashContext, DashEnv } from '../session.ts';
import { ActorName, Section, StackTable, Time } from '../ui.tsx';

const FIELDS = ['since', 'until', 'actor', 'action', 'resource_id'] as const;

const Filters = ({ c, q }: { c: DashContext; q: AuditListInput }) => (
  <FilterForm c={c} action={c.get('paths').audit} label="Filter the audit log">
    <FilterField id="a_since" label="Since" name="since" value={q.since} maxlength={64} placeholder="7d" describedBy="a-time-hint">
      <p class="hint" id="a-time-hint">
        An ISO 8601 time or a duration back from now (30m, 2h, 7d).
      </p>
    </FilterField>
    <FilterField id="a_actor" label="Token ID" name="actor" value={q.actor} maxlength={64} placeholder="tok_…" />
    <FilterField id="a_action" label="Action" name="action" value={q.action} maxlength={100} placeholder="rollbacks.create" />
    <FilterField id="a_resource" label="Resource ID" name="resource_id" value={q.resource_id} maxlength={200} />
  </FilterForm>
);

const statusText = (s: number | null) => (s === null ? 'local' : s < 400 ? `${s}` : `${s} refused`);

const AuditTable = ({ entries, oldest }: { entries: AuditView[]; oldest: boolean }) => (
  <StackTable
    id="audit"
    caption={`Changes, ${oldest ? 'oldest' : 'newest'} first`}
    columns={['When', 'Who', 'Action', 'Resource', 'Status']}
    items={entries}
    empty="No changes match."
    row={(e) => (
      <tr class={e.status !== null && e.status >= 400 ? 'refused' : undefined} data-audit-id={e.id}>
        <td data-label="When">
          <Time iso={e.at} />
        </td>
        <td data-label="Who">
          <ActorName actor={e.actor} />
        </td>
        <td data-label="Action">
          <code>{e.action}</code>
        </td>
        <td data-label="Resource">
          {e.resource_id ? (
            <>
              <span class="muted">{e.resource_type}</span> <code>{e.resource_id}</code>
            </>
          ) : (
            <span class="muted">—</span>
          )}
        </td>
        <td data-label="Status">{statusText(e.status)}</td>
      </tr>
    )}
  />
);

export function registerAudit(r: Hono<DashEnv>, ctx: AppContext) {
  r.get('/:org/audit', (c) => {
    const s = c.get('session')!;
    if (!may(c, 'admin'))
      throw new ForbiddenError('admin', `the audit log needs a token with scope admin; this session's token has scope ${s.scope}`);
    const raw = Object.fromEntries(FIELDS.map((k) => [k, c.req.query(k)?.trim() || undefined]).filter(([, v]) => v !== undefined));
    const after = c.req.query('after');
    const parsed = auditListQuerySchema.safeParse({ ...raw, ...(after ? { after } : {}) });
    const oldest = oldestFirst(c);
    const q: AuditListInput = { ...(parsed.success ? parsed.data : {}), newest_first: !oldest };
    let page: ReturnType<typeof listAudit>;
    let error: string | null = parsed.success ? null : 'A filter is not valid; showing everything.';
    try {
      page = listAudit(ctx, s.org_id, q);
    } catch (err) {
      if (!(err instanceof InvalidError)) throw err;
      error = err.message;
      page = listAudit(ctx, s.org_id, { newest_first: !oldest });
    }
    const order: Record<string, string> = oldest ? { order: 'oldest' } : {};
    const next = page.next_cursor
      ? `${c.get('paths').audit}?${new URLSearchParams({ ...(raw as Record<string, string>), ...order, after: page.next_cursor })}`
      : null;
    // the other order, from its first page, with the same filters
    const turnedQuery = new URLSearchParams({ ...(raw as Record<string, string>), ...(oldest ? {} : { order: 'oldest' }) }).toString();
    const turned = `${c.get('paths').audit}${turnedQuery ? `?${turnedQuery}` : ''}`;
    return render(c, {
      title: 'Audit log',
      current: 'audit',
      children: (
        <>
          <h1>Audit log</h1>
          <p class="hint">
            Every change made through the API or this dashboard, refused ones too, with the token that made it. Never a request body or a
            secret.
          </p>
          <Section headingId="h-audit-filter" title="Filter">
            {error ? (
              <p class="step-error" role="alert">
                {error}
              </p>
            ) : null}
            <Filters c={c} q={raw as AuditListInput} />
          </Section>
          <Section headingId="h-audit" title="Changes">
            <p class="hint">
              {oldest ? 'Oldest' : 'Newest'} first.{' '}
              <a href={turned} id="audit-order">
                {oldest ? 'Newest first' : 'Oldest first'}
              </a>
            </p>
            <AuditTable entries={page.data} oldest={oldest} />
            {next ? (
              <p>
                <a href={next} rel="next">
                  Next page
                </a>
              </p>
            ) : null}
          </Section>
        </>
      ),
    });
  });
}
