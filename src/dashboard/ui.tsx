// Shared page furniture: the layout, status badges, CSRF fields, JSON and diff views.
import type { Child, FC } from 'hono/jsx';
import { raw } from 'hono/html';
import type { Flash } from './session.ts';
import type { Paths } from './paths.ts';

export interface PageProps {
  title: string;
  paths: Paths;
  /** signed-in org and the session's CSRF token (and whether its token is admin: the audit log's link); absent on the login page */
  org?: { id: string; csrf: string; admin?: boolean };
  /** steps awaiting approval in the org (shown in the navigation) */
  pendingApprovals?: number;
  flash?: Flash;
  /** seconds; set while a workflow is running: the page reloads itself (app.js) unless the reader pauses it */
  refresh?: number;
  current?: 'overview' | 'installs' | 'apps' | 'approvals' | 'webhooks' | 'events' | 'event-types' | 'rejections' | 'audit' | 'settings';
  children?: Child;
}

export const Layout: FC<PageProps> = (p) => (
  <>
    {raw('<!doctype html>')}
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <title>{p.title} · svc</title>
        <link rel="stylesheet" href={p.paths.style} />
        {p.refresh ? <script src={p.paths.script} defer></script> : null}
      </head>
      <body>
        <a class="skip" href="#main">
          Skip to content
        </a>
        <header class="top">
          <a class="brand" href={p.org ? p.paths.org : p.paths.login()}>
            svc
          </a>
          {p.org ? <Nav paths={p.paths} org={p.org} current={p.current} pending={p.pendingApprovals} /> : null}
        </header>
        <main id="main">
          {p.flash ? <FlashBox flash={p.flash} /> : null}
          {p.refresh ? <RefreshControl seconds={p.refresh} /> : null}
          {p.children}
        </main>
      </body>
    </html>
  </>
);

/** The auto-refresh switch (shown by app.js, which does the refreshing) and a plain reload link. */
const RefreshControl: FC<{ seconds: number }> = ({ seconds }) => (
  <p class="refresh" data-refresh-seconds={String(seconds)}>
    <label class="check" hidden>
      <input type="checkbox" id="auto-refresh" checked /> Refresh this page every {seconds} s
    </label>{' '}
    <a href="">Reload</a>
  </p>
);

const FlashBox: FC<{ flash: Flash }> = ({ flash }) => (
  <div class={`flash ${flash.kind}`} role={flash.kind === 'error' ? 'alert' : 'status'}>
    <p>{flash.text}</p>
    {flash.details?.length ? (
      <dl class="facts">
        {flash.details.map(([k, v]) => (
          <>
            <dt>{k}</dt>
            <dd>{v}</dd>
          </>
        ))}
      </dl>
    ) : null}
  </div>
);

const Nav: FC<{ paths: Paths; org: { id: string; csrf: string; admin?: boolean }; current?: PageProps['current']; pending?: number }> = ({
  paths,
  org,
  current,
  pending,
}) => {
  const item = (key: NonNullable<PageProps['current']>, href: string, label: string, extra?: Child) => (
    <li>
      <a href={href} aria-current={current === key ? 'page' : undefined}>
        {label}
        {extra}
      </a>
    </li>
  );
  return (
    <nav aria-label="Main">
      <ul>
        {item('overview', paths.org, 'Overview')}
        {item('installs', paths.installs, 'Installs')}
        {item('apps', paths.apps, 'Apps')}
        {item(
          'approvals',
          paths.approvals,
          'Approvals',
          pending ? (
            <>
              {' '}
              <span class="count">
                {pending}
                <span class="sr-only"> waiting</span>
              </span>
            </>
          ) : null,
        )}
        {item('webhooks', paths.webhooks, 'Webhooks')}
        {item('events', paths.events, 'Events')}
        {item('event-types', paths.eventTypes, 'Event types')}
        {item('rejections', paths.rejections, 'Rejections')}
        {org.admin ? item('audit', paths.audit, 'Audit') : null}
        {item('settings', paths.settings, 'Settings')}
      </ul>
      <form method="post" action={paths.logout} class="inline">
        <Csrf token={org.csrf} />
        <span class="muted org-id">{org.id}</span>{' '}
        <button type="submit" class="link">
          Sign out
        </button>
      </form>
    </nav>
  );
};

export const Csrf: FC<{ token: string }> = ({ token }) => <input type="hidden" name="csrf" value={token} />;

/** A form of one danger button (delete, cancel) that posts to `action` with the session's CSRF token. */
export const DangerForm: FC<{ action: string; token: string; layout: 'inline' | 'actions'; children?: Child }> = (p) => (
  <form method="post" action={p.action} class={p.layout}>
    <Csrf token={p.token} />
    <button type="submit" class="danger">
      {p.children}
    </button>
  </form>
);

const TERMINAL = new Set(['succeeded', 'failed', 'cancelled', 'skipped']);
export const isTerminal = (status: string) => TERMINAL.has(status);

export const StatusBadge: FC<{ status: string | null | undefined }> = ({ status }) => {
  const s = status ?? 'unknown';
  return <span class={`badge s-${s.replace(/[^a-z_]/g, '')}`}>{s.replace(/_/g, ' ')}</span>;
};

/** The status (with its error), time and duration cells of a workflow's or a step's row. */
export const RunCells: FC<{
  run: { status: string; error?: string | null; started_at: string | null; finished_at: string | null };
  time: string | null;
  timeLabel: string;
}> = ({ run, time, timeLabel }) => (
  <>
    <td data-label="Status">
      <StatusBadge status={run.status} />
      {run.error ? <div class="step-error">{run.error}</div> : null}
    </td>
    <td data-label={timeLabel}>
      <Time iso={time} />
    </td>
    <td data-label="Duration">{duration(run.started_at, run.finished_at)}</td>
  </>
);

/** One entry of a facts list (`<dl class="facts">`): the term's `<dt>` and the `<dd>` of its value. */
export const FactLine: FC<{ term: Child; id?: string; children?: Child }> = ({ term, id, children }) => (
  <>
    <dt>{term}</dt>
    <dd id={id}>{children}</dd>
  </>
);

/** A fact whose value is an id or a literal, shown as code. */
export const CodeFact: FC<{ term: Child; value: Child; id?: string }> = ({ term, value, id }) => (
  <FactLine term={term} id={id}>
    <code>{value}</code>
  </FactLine>
);

/** A fact whose value is a time (— when there is none). */
export const TimeFact: FC<{ term: Child; iso: string | null | undefined; id?: string }> = ({ term, iso, id }) => (
  <FactLine term={term} id={id}>
    <Time iso={iso} />
  </FactLine>
);

/** A field of a form: its label, its input (`input` props: type, name, value, …) and what follows it (a hint). */
export const LabeledInput = ({
  id,
  label,
  type,
  children,
  ...input
}: {
  id: string;
  label: string;
  type: string;
  children?: Child;
  [attr: string]: unknown;
}) => (
  <div>
    <label for={id}>{label}</label>
    <input type={type} id={id} {...input} />
    {children}
  </div>
);

/** A choice of a form: its label, the select (`select` props: required, …) with its options, and what follows it (a hint). */
export const LabeledSelect = ({
  id,
  label,
  name,
  after,
  children,
  ...select
}: {
  id: string;
  label: string;
  name: string;
  after?: Child;
  children?: Child;
  [attr: string]: unknown;
}) => (
  <div>
    <label for={id}>{label}</label>
    <select id={id} name={name} {...select}>
      {children}
    </select>
    {after}
  </div>
);

/** A field of a form with the hint that describes it (`aria-describedby`). */
export const HintedField = ({ hint, ...field }: { id: string; label: string; hint: Child; type: string; [attr: string]: unknown }) => (
  <LabeledInput {...field} aria-describedby={`${field.id}-hint`}>
    <p class="hint" id={`${field.id}-hint`}>
      {hint}
    </p>
  </LabeledInput>
);

/** A page's heading: what it shows, then (muted) which one. */
export const Heading: FC<{ title: Child; sub: Child }> = ({ title, sub }) => (
  <h1>
    {title} <span class="h-sub">{sub}</span>
  </h1>
);

/** A page section named by its heading: `<section aria-labelledby>` around an `<h2>` of that id. */
export const Section: FC<{ headingId: string; title: Child; id?: string; children?: Child }> = ({ headingId, title, id, children }) => (
  <section aria-labelledby={headingId} id={id}>
    <h2 id={headingId}>{title}</h2>
    {children}
  </section>
);

/** A page that is one list: its heading, and the list in a section labelled by it. */
export const ListPage: FC<{ title: string; children?: Child }> = ({ title, children }) => (
  <>
    <h1>{title}</h1>
    <section aria-label={title}>{children}</section>
  </>
);

/** A page's Details section: its facts list (`FactLine` entries as children). */
export const DetailsSection: FC<{ headingId: string; children?: Child }> = ({ headingId, children }) => (
  <Section headingId={headingId} title="Details">
    <dl class="facts">{children}</dl>
  </Section>
);

/**
 * A table that stacks into labelled cards on narrow screens (class `stack-sm`; each cell carries
 * its column as data-label): one header row of `columns` (a falsy entry is a column left out),
 * one `row` per item. With `empty`, no items show that muted line instead of an empty table.
 */
export function StackTable<T>(p: { columns: Child[]; items: T[]; row: (item: T) => Child; empty?: Child; id?: string; caption?: Child }) {
  if (!p.items.length && p.empty !== undefined) return <p class="muted">{p.empty}</p>;
  return (
    <div class="table-wrap">
      <table class="stack-sm" id={p.id}>
        {p.caption ? <caption class="sr-only">{p.caption}</caption> : null}
        <thead>
          <tr>{p.columns.map((c) => (c ? <th scope="col">{c}</th> : null))}</tr>
        </thead>
        <tbody>{p.items.map(p.row)}</tbody>
      </table>
    </div>
  );
}

export const Json: FC<{ value: unknown; label?: string }> = ({ value, label }) => (
  <pre class="json" aria-label={label} tabindex={0}>
    {JSON.stringify(value, null, 2)}
  </pre>
);

/** "1.2 s", "3 min 4 s" from two ISO timestamps (to now while running). */
export function duration(start: string | null | undefined, end: string | null | undefined): string {
  if (!start) return '—';
  const ms = (end ? Date.parse(end) : Date.now()) - Date.parse(start);
  if (!Number.isFinite(ms) || ms < 0) return '—';
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  const min = Math.floor(ms / 60_000);
  return `${min} min ${Math.round((ms % 60_000) / 1000)} s`;
}

export const Time: FC<{ iso: string | null | undefined }> = ({ iso }) =>
  iso ? <time datetime={iso}>{iso.replace('T', ' ').replace(/\.\d+Z$/, 'Z')}</time> : <span class="muted">—</span>;

export interface DiffShape {
  changed: boolean;
  components: {
    added: Array<{ name: string }>;
    removed: Array<{ name: string }>;
    changed: Array<{ name: string; changes: Array<{ path: string; op: string; old?: unknown; new?: unknown }> }>;
    unchanged: Array<{ name: string }>;
  };
  sandbox_changed: boolean;
  inputs_changed: boolean;
}

const show = (v: unknown) => (v === undefined ? '∅' : JSON.stringify(v));

/** A config diff (CONTRACT 4.3 shape) as a readable list. */
export const Diff: FC<{ diff: DiffShape }> = ({ diff }) => {
  if (!diff.changed) return <p class="muted">No changes.</p>;
  const c = diff.components;
  return (
    <ul class="diff">
      {diff.sandbox_changed ? <li class="chg">~ sandbox changed</li> : null}
      {diff.inputs_changed ? <li class="chg">~ inputs changed</li> : null}
      {c.added.map((a) => (
        <li class="add">+ {a.name} (added)</li>
      ))}
      {c.removed.map((r) => (
        <li class="del">− {r.name} (removed)</li>
      ))}
      {c.changed.map((ch) => (
        <li class="chg">
          ~ {ch.name}
          <ul>
            {ch.changes.map((f) => (
              <li>
                <code>{f.path}</code>:{' '}
                {f.op === 'add' ? `+ ${show(f.new)}` : f.op === 'remove' ? `− ${show(f.old)}` : `${show(f.old)} → ${show(f.new)}`}
              </li>
            ))}
          </ul>
        </li>
      ))}
      {c.unchanged.length ? <li class="muted">= {c.unchanged.map((u) => u.name).join(', ')} (unchanged)</li> : null}
    </ul>
  );
};

export const LabelList: FC<{ labels: Record<string, string> | null | undefined }> = ({ labels }) => {
  const entries = Object.entries(labels ?? {});
  if (!entries.length) return <span class="muted">none</span>;
  return (
    <span class="labels">
      {entries.map(([k, v]) => (
        <code class="label">
          {k}={v}
        </code>
      ))}
    </span>
  );
};

export const Errors: FC<{ errors: Array<{ path: string; message: string }> | undefined; title?: string }> = ({ errors, title }) =>
  errors?.length ? (
    <div class="flash error" role="alert">
      <p>{title ?? 'Please fix the following:'}</p>
      <ul>
        {errors.map((e) => (
          <li>
            <code>{e.path}</code> {e.message}
          </li>
        ))}
      </ul>
    </div>
  ) : null;

/** Who a workflow belongs to, in words: "install rb-1", "branch main of app shop", "app shop". */
export interface OwnerLike {
  type: string;
  id: string;
  name: string | null;
  app: { app_id: string; name: string } | null;
}

export function ownerText(o: OwnerLike): string {
  if (o.type === 'installs') return o.name ? `install ${o.name}` : `install ${o.id}`;
  if (o.type === 'app_branches') return o.name ? `branch ${o.name}${o.app ? ` of app ${o.app.name}` : ''}` : `branch ${o.id}`;
  if (o.type === 'apps') return o.name ? `app ${o.name}` : `app ${o.id}`;
  return `${o.type} ${o.id}`;
}

/** The owner in words, linked when it has a page (installs), with its id as secondary text. */
export const Owner: FC<{ owner: OwnerLike; paths: Paths }> = ({ owner, paths }) => (
  <>
    {owner.type === 'installs' && owner.name ? (
      <>
        install <a href={paths.install(owner.id)}>{owner.name}</a>
      </>
    ) : owner.type === 'apps' && owner.name ? (
      <>
        app <a href={paths.app(owner.id)}>{owner.name}</a>
      </>
    ) : owner.type === 'app_branches' && owner.name && owner.app ? (
      <>
        branch {owner.name} of app <a href={paths.app(owner.app.app_id)}>{owner.app.name}</a>
      </>
    ) : (
      ownerText(owner)
    )}{' '}
    <span class="muted id">{owner.id}</span>
  </>
);

/** Who answered an approval: a token (as ActorName), or the approval policy itself and why (CONTRACT 10.4 auto_approve). */
export const RespondedByName: FC<{ by: { token_id: string | null; token_name: string | null } | { type: 'policy'; reason: string } }> = ({
  by,
}) =>
  'type' in by ? (
    <span class="actor">
      <strong>the approval policy</strong> <span class="muted">({by.reason})</span>
    </span>
  ) : (
    <ActorName actor={by} />
  );

/** Who made a change: the token's name (its id beside it), or `local` for a database command (CONTRACT 2). */
export const ActorName: FC<{ actor: { token_id: string | null; token_name: string | null } }> = ({ actor }) => (
  <span class="actor">
    <strong>{actor.token_name ?? 'an unnamed token'}</strong>
    {actor.token_id ? (
      <>
        {' '}
        <span class="muted id">{actor.token_id}</span>
      </>
    ) : null}
  </span>
);

/** In place of a form the session's scope cannot use (CONTRACT 2: a session has its token's scope). */
export const ScopeNote: FC<{ have: string; need: string; what: string }> = ({ have, need, what }) => (
  <p class="muted scope-note">
    {what} needs a token with scope {need}
    {need === 'admin' ? '' : ' or admin'}; this session's token has scope {have}.
  </p>
);
