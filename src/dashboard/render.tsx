// Rendering a page for the current request (layout, session, flash) and the error pages.
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import type { DashContext } from './session.ts';
import { Layout, ListPage, type PageProps } from './ui.tsx';
import type { Child } from 'hono/jsx';

export type PageOptions = Omit<PageProps, 'paths' | 'org' | 'flash' | 'pendingApprovals'>;

export function render(c: DashContext, opts: PageOptions, status: ContentfulStatusCode = 200) {
  const s = c.get('session');
  return c.html(
    <Layout
      {...opts}
      paths={c.get('paths')}
      org={s ? { id: s.org_id, csrf: s.csrf, admin: s.scope === 'admin' } : undefined}
      flash={c.get('flash')}
      pendingApprovals={c.get('pendingApprovals')}
    />,
    status,
  );
}

/** A page that is one list under its title (the apps, the installs). */
export function renderList(c: DashContext, title: string, current: PageOptions['current'], list: Child) {
  return render(c, { title, current, children: <ListPage title={title}>{list}</ListPage> });
}

/** The signed-in session's CSRF token (pages behind the org guard only). */
export const csrfOf = (c: DashContext): string => c.get('session')?.csrf ?? '';

export function notFoundPage(c: DashContext) {
  return render(
    c,
    {
      title: 'Not found',
      children: (
        <>
          <h1>Not found</h1>
          <p>There is no such page, or it belongs to another org.</p>
        </>
      ),
    },
    404,
  );
}

export function errorPage(c: DashContext, status: ContentfulStatusCode, title: string, text: string) {
  return render(
    c,
    {
      title,
      children: (
        <>
          <h1>{title}</h1>
          <p>{text}</p>
        </>
      ),
    },
    status,
  );
}
