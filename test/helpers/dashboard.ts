// The dashboard over plain HTTP (no browser): sign in through the login form and submit forms with
// the session's CSRF token, as a browser would.
import type { OrgCreds } from './service.ts';

export interface DashboardSession {
  /** the session's cookie (`svc_session=…`), for a client in another process */
  cookie: string;
  /** GET a dashboard path (relative to the dashboard URL) with the session cookie; redirects are not followed. */
  get(p: string): Promise<Response>;
  /** POST a form to a dashboard path with the session cookie and the CSRF token of the page at `formPage`. */
  submit(formPage: string, p: string, form: Record<string, string>): Promise<Response>;
}

const cookieOf = (res: Response, name: string) =>
  res.headers
    .getSetCookie()
    .find((c) => c.startsWith(`${name}=`))
    ?.split(';')[0];
const csrfIn = (html: string) => /name="csrf" value="([^"]+)"/.exec(html)?.[1];

function postForm(url: string, form: Record<string, string>, cookie?: string): Promise<Response> {
  return fetch(url, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...(cookie ? { cookie } : {}) },
    body: new URLSearchParams(form),
  });
}

/** Sign in to the dashboard at `dash` (e.g. `<base>/dashboard`) as `org`. */
export async function dashboardSession(dash: string, org: OrgCreds): Promise<DashboardSession> {
  const loginPage = await fetch(`${dash}/login`, { redirect: 'manual' });
  const loginCookie = cookieOf(loginPage, 'svc_login_csrf');
  const loginCsrf = csrfIn(await loginPage.text());
  if (!loginCookie || !loginCsrf) throw new Error('the login page has no CSRF cookie or field');
  const res = await postForm(`${dash}/login`, { csrf: loginCsrf, org_id: org.org_id, api_token: org.api_token }, loginCookie);
  const session = cookieOf(res, 'svc_session');
  if (!session) throw new Error(`sign-in failed: HTTP ${res.status}`);
  const get = (p: string) => fetch(dash + p, { redirect: 'manual', headers: { cookie: session } });
  return {
    cookie: session,
    get,
    async submit(formPage, p, form) {
      const page = await get(formPage);
      const csrf = csrfIn(await page.text());
      if (!csrf) throw new Error(`${formPage} has no CSRF field (HTTP ${page.status})`);
      return postForm(dash + p, { ...form, csrf }, session);
    },
  };
}
