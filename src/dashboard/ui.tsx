// Shared page furniture: the layout, status badges, CSRF fields, JSON and diff views.
import type { Child, FC } from 'hono/jsx';
import { raw } from 'hono/html';
import type { Flash } from './session.ts';
import type { Paths } from './paths.ts';

export interface PageProps {
  title: string;
  paths: Paths;
  /** signed-in org and the session's CSRF token; absent on the login page */
  org?: { id: string; csrf: string };
  flash?: Flash;
  /** seconds; set while a workflow is running */
  refresh?: number;
  current?: 'overview' | 'installs' | 'webhooks' | 'settings';
  children?: Child;
}

export const Layout: FC<PageProps> = (p) => (
  <>
    {raw('<!doctype html>')}
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        {p.refresh ? <meta http-equiv="refresh" content={String(p.refresh)} /> : null}
        <title>{p.title} · svc</title>
        <link rel="stylesheet" href={p.paths.style} />
      </head>
      <body>
        <a class="skip" href="#main">
          Skip to content
        </a>
        <header class="top">
          <a class="brand" href={p.org ? p.paths.org : p.paths.login()}>
            svc
          </a>
          {p.org ? <Nav paths={p.paths} org={p.org} current={p.current} /> : null}
        </header>
        <main id="main">
          {p.flash ? (
            <p class={`flash ${p.flash.kind}`} role={p.flash.kind === 'error' ? 'alert' : 'status'}>
              {p.flash.text}
            </p>
          ) : null}
          {p.children}
        </main>
      </body>
    </html>
  </>
);

const Nav: FC<{ paths: Paths; org: { id: string; csrf: string }; current?: PageProps['current'] }> = ({ paths, org, current }) => {
  const item = (key: NonNullable<PageProps['current']>, href: string, label: string) => (
    <li>
      <a href={href} aria-current={current === key ? 'page' : undefined}>
        {label}
      </a>
    </li>
  );
  return (
    <nav aria-label="Main">
      <ul>
        {item('overview', paths.org, 'Overview')}
        {item('installs', paths.installs, 'Installs')}
        {item('webhooks', paths.webhooks, 'Webhooks')}
        {item('settings', paths.settings, 'Settings')}
      </ul>
      <form method="post" action={paths.logout} class="inline">
        <Csrf token={org.csrf} />
        <span class="muted org-id">{org.id}</span> <button type="submit" class="link">Sign out</button>
      </form>
    </nav>
  );
};

export const Csrf: FC<{ token: string }> = ({ token }) => <input type="hidden" name="csrf" value={token} />;

const TERMINAL = new Set(['succeeded', 'failed', 'cancelled', 'skipped']);
export const isTerminal = (status: string) => TERMINAL.has(status);

export const Status: FC<{ status: string | null | undefined }> = ({ status }) => {
  const s = status ?? 'unknown';
  return <span class={`badge s-${s.replace(/[^a-z_]/g, '')}`}>{s.replace(/_/g, ' ')}</span>;
};

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
                <code>{f.path}</code>: {f.op === 'add' ? `+ ${show(f.new)}` : f.op === 'remove' ? `− ${show(f.old)}` : `${show(f.old)} → ${show(f.new)}`}
              </li>
            ))}
          </ul>
        </li>
      ))}
      {c.unchanged.length ? <li class="muted">= {c.unchanged.map((u) => u.name).join(', ')} (unchanged)</li> : null}
    </ul>
  );
};

export const Labels: FC<{ labels: Record<string, string> | null | undefined }> = ({ labels }) => {
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
  errors && errors.length ? (
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
