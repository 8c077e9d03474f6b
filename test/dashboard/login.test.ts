// Dashboard sign-in hardening (CONTRACT 6.7, 7): the login CSRF token is signed with the server's
// key for this browser's cookie (so a cookie tossed in by someone else, or another browser's token,
// does not pass), forms posted from another site are refused, and repeated failed sign-ins for an
// org back off for a minute (the injected clock moves it).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../helpers/clock.ts';
import { startService, type OrgCreds, type TestService } from '../helpers/service.ts';

describe('dashboard sign-in', () => {
  const clock = new ManualClock(Date.now());
  let svc: TestService;
  let org: OrgCreds;
  let other: OrgCreds;
  let dash: string;

  const get = (p: string, cookie?: string) => fetch(dash + p, { redirect: 'manual', headers: cookie ? { cookie } : {} });
  const post = (p: string, form: Record<string, string>, cookie?: string, extra: Record<string, string> = {}) =>
    fetch(dash + p, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded', ...(cookie ? { cookie } : {}), ...extra },
      body: new URLSearchParams(form),
    });
  const cookieOf = (res: Response, name: string) =>
    res.headers
      .getSetCookie()
      .find((c) => c.startsWith(`${name}=`))
      ?.split(';')[0];
  const csrfIn = (html: string) => /name="csrf" value="([^"]+)"/.exec(html)?.[1];
  /** A fresh browser's sign-in form: its cookie and the form's token. */
  async function form(cookie?: string): Promise<{ cookie: string; csrf: string }> {
    const res = await get('/login', cookie);
    return { cookie: cookieOf(res, 'svc_login_csrf') ?? cookie!, csrf: csrfIn(await res.text())! };
  }
  const signIn = (f: { cookie: string; csrf: string }, creds: OrgCreds, extra: Record<string, string> = {}) =>
    post('/login', { csrf: f.csrf, org_id: creds.org_id, api_token: creds.api_token }, f.cookie, extra);

  beforeAll(async () => {
    svc = await startService({ localRunner: false }, { clock });
    org = svc.createOrg('login-a');
    other = svc.createOrg('login-b');
    dash = `${svc.url}/dashboard`;
  });
  afterAll(async () => svc?.stop());

  it("a CSRF value of the visitor's choosing (cookie tossing), another browser's token, an expired form or a form posted from another site is refused (403)", async () => {
    // the old double-submit check: any equal cookie and field passed
    const chosen = 'A'.repeat(43);
    expect((await signIn({ cookie: `svc_login_csrf=${chosen}`, csrf: chosen }, org)).status).toBe(403);
    // a token is good only with the cookie it was made for
    const a = await form();
    const b = await form();
    expect(a.cookie).not.toBe(b.cookie);
    expect((await signIn({ cookie: b.cookie, csrf: a.csrf }, org)).status).toBe(403);
    // a token signed for a cookie, with that cookie's value as the token (not the signature)
    expect((await signIn({ cookie: a.cookie, csrf: a.cookie.split('=')[1] }, org)).status).toBe(403);
    // posted from another site (browsers send Origin with every form POST)
    expect((await signIn(a, org, { origin: 'https://evil.example' })).status).toBe(403);
    // a second tab of one browser keeps its cookie: both forms are good
    const again = await form(a.cookie);
    expect(again.cookie).toBe(a.cookie);
    // a form older than an hour has expired
    const old = await form();
    clock.advance(60 * 60_000 + 1000);
    expect((await signIn(old, org)).status).toBe(403);
    // the genuine form, from this site
    const tab1 = await form();
    clock.advance(1000);
    const tab2 = await form(tab1.cookie);
    expect(tab2.csrf).not.toBe(tab1.csrf);
    for (const tab of [tab1, tab2]) {
      const ok = await signIn(tab, org, { origin: svc.url });
      expect(ok.status).toBe(303);
      expect(cookieOf(ok, 'svc_session')).toBeDefined();
    }
  });

  it('over https the cookie is __Host-svc_login_csrf; the same value under the plain name (which a sibling subdomain could set) does not pass', async () => {
    const s2 = await startService({ localRunner: false, dashboardUrl: 'https://ops.example.com/dash' });
    try {
      const o = s2.createOrg('https-login');
      const page = await fetch(`${s2.url}/dash/login`);
      const hostCookie = page.headers
        .getSetCookie()
        .find((c) => c.startsWith('__Host-svc_login_csrf='))!
        .split(';')[0];
      const csrf = csrfIn(await page.text())!;
      const send = (cookie: string) =>
        fetch(`${s2.url}/dash/login`, {
          method: 'POST',
          redirect: 'manual',
          headers: { 'content-type': 'application/x-www-form-urlencoded', cookie, origin: 'https://ops.example.com' },
          body: new URLSearchParams({ csrf, org_id: o.org_id, api_token: o.api_token }),
        });
      expect((await send(hostCookie.replace('__Host-', ''))).status).toBe(403);
      expect((await send(hostCookie)).status).toBe(303);
    } finally {
      await s2.stop();
    }
  });

  it('after 5 failed sign-ins for an org within a minute, sign-ins for it are refused (429, Retry-After) until the minute has passed; other orgs are not', async () => {
    const wrong = { org_id: other.org_id, api_token: org.api_token };
    for (let i = 0; i < 5; i++) {
      expect((await signIn(await form(), wrong)).status).toBe(401);
      clock.advance(1000);
    }
    const blocked = await signIn(await form(), other);
    expect(blocked.status).toBe(429);
    const retry = Number(blocked.headers.get('retry-after'));
    expect(retry).toBeGreaterThan(0);
    expect(retry).toBeLessThanOrEqual(60);
    expect(cookieOf(blocked, 'svc_session')).toBeUndefined();
    expect(await blocked.text()).toContain('Too many failed sign-ins');
    // another org signs in meanwhile
    expect((await signIn(await form(), org)).status).toBe(303);
    clock.advance(retry * 1000);
    const ok = await signIn(await form(), other);
    expect(ok.status).toBe(303);
    expect(cookieOf(ok, 'svc_session')).toBeDefined();
  });
});
