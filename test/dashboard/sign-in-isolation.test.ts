// Dashboard sign-in isolation (CONTRACT 8, last bullet): failed sign-ins are counted per client
// address AND org, so failures from one address do not lock another client out of the org; the
// address comes from X-Forwarded-For only with --trust-proxy; an org id that is not a well-formed id
// is 400 and locks nobody; a body over 8 KiB is 413 unread, so 200 posts of a 1 MB org id leave
// svc's memory where it was; a login form token is good for one attempt.
import fs from 'node:fs';
import { Agent, fetch as undiciFetch } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../helpers/clock.ts';
import { SIGN_IN_MAX_KEYS, SignInThrottle } from '../../src/dashboard/sign-in-throttle.ts';
import { LOGIN_FORM_TTL_MS, LoginCsrf, MAX_FORMS_PER_SECOND } from '../../src/dashboard/session.ts';
import { children, spawnService, type ChildService } from '../helpers/child-service.ts';
import { newDbWithOrg, startService, type OrgCreds, type TestService } from '../helpers/service.ts';
import { openDb } from '../../store/db.ts';
import { createOrg } from '../../store/orgs.ts';

const cookieOf = (res: Response, name: string) =>
  res.headers
    .getSetCookie()
    .find((c) => c.startsWith(`${name}=`))
    ?.split(';')[0];
const csrfIn = (html: string) => /name="csrf" value="([^"]+)"/.exec(html)?.[1];

/** A browser of the dashboard at `dash`; with `from`, its connections leave from that local address. */
function browser(dash: string, from?: Agent) {
  const send = (url: string, req: RequestInit): Promise<Response> =>
    from
      ? (undiciFetch(url, { ...(req as object), dispatcher: from } as Parameters<typeof undiciFetch>[1]) as unknown as Promise<Response>)
      : fetch(url, req);
  const get = (p: string, cookie?: string) => send(dash + p, { redirect: 'manual', headers: cookie ? { cookie } : {} });
  const post = (p: string, form: Record<string, string>, cookie: string, headers: Record<string, string> = {}) =>
    send(dash + p, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded', cookie, ...headers },
      body: new URLSearchParams(form),
    });
  async function form(): Promise<{ cookie: string; csrf: string }> {
    const res = await get('/login');
    return { cookie: cookieOf(res, 'svc_login_csrf')!, csrf: csrfIn(await res.text())! };
  }
  const signIn = async (org_id: string, api_token: string, headers: Record<string, string> = {}) => {
    const f = await form();
    return post('/login', { csrf: f.csrf, org_id, api_token }, f.cookie, headers);
  };
  return { get, post, form, signIn };
}

function orgIn(db: string, name: string): OrgCreds {
  const h = openDb(db);
  try {
    const { org, api_token } = createOrg(h, name);
    return { org_id: org.org_id, api_token };
  } finally {
    h.close();
  }
}

describe('svc serve --trust-proxy (a child process)', () => {
  let svc: ChildService;
  let a: OrgCreds;
  let b: OrgCreds;
  let dash: string;

  beforeAll(async () => {
    const made = newDbWithOrg('signin-a');
    a = made.org;
    b = orgIn(made.db, 'signin-b');
    svc = await spawnService(made.db, ['--trust-proxy']);
    dash = `${svc.url}/dashboard`;
  }, 30_000);
  afterAll(() => {
    for (const c of children) c.kill('SIGKILL');
  });

  it("10 failed sign-ins for B's org from 127.0.0.2 lock out 127.0.0.2 only: B signs in from 127.0.0.1 at once", async () => {
    const ui = browser(dash);
    const from2 = { 'x-forwarded-for': '127.0.0.2' };
    const statuses: number[] = [];
    for (let i = 0; i < 10; i++) statuses.push((await ui.signIn(b.org_id, a.api_token, from2)).status);
    expect(statuses).toEqual([401, 401, 401, 401, 401, 429, 429, 429, 429, 429]);
    // even B's right token, from that address: 429
    expect((await ui.signIn(b.org_id, b.api_token, from2)).status).toBe(429);
    // B from its own address (the connection's, no header): signed in
    const ok = await ui.signIn(b.org_id, b.api_token);
    expect(ok.status).toBe(303);
    expect(cookieOf(ok, 'svc_session')).toBeDefined();
    // and from another address behind the proxy (the proxy adds the last entry; what the client wrote comes first)
    expect((await ui.signIn(b.org_id, b.api_token, { 'x-forwarded-for': '127.0.0.2, 10.1.2.3' })).status).toBe(303);
  });

  it('an org id that is not a well-formed id is 400 and locks nobody out', async () => {
    const ui = browser(dash);
    for (const bad of [b.org_id.toUpperCase(), `${b.org_id} x`, 'x'.repeat(65), '', `${b.org_id}\u0000`]) {
      const r = await ui.signIn(bad, 'wrong');
      expect(r.status, JSON.stringify(bad)).toBe(400);
      expect(cookieOf(r, 'svc_session')).toBeUndefined();
    }
    for (let i = 0; i < 6; i++) expect((await ui.signIn(b.org_id.toUpperCase(), 'wrong')).status).toBe(400);
    expect((await ui.signIn(b.org_id, b.api_token)).status).toBe(303);
  });

  it('a login form token is good for one attempt, failed or not', async () => {
    const ui = browser(dash);
    const f = await ui.form();
    expect((await ui.post('/login', { csrf: f.csrf, org_id: a.org_id, api_token: 'wrong' }, f.cookie)).status).toBe(401);
    // the same token again, now with the right token: refused
    const again = await ui.post('/login', { csrf: f.csrf, org_id: a.org_id, api_token: a.api_token }, f.cookie);
    expect(again.status).toBe(403);
    expect(cookieOf(again, 'svc_session')).toBeUndefined();
    // a successful sign-in uses its token too
    const g = await ui.form();
    expect((await ui.post('/login', { csrf: g.csrf, org_id: a.org_id, api_token: a.api_token }, g.cookie)).status).toBe(303);
    expect((await ui.post('/login', { csrf: g.csrf, org_id: a.org_id, api_token: a.api_token }, g.cookie)).status).toBe(403);
    // two forms of one browser are each good once
    const t1 = await ui.form();
    const t2 = await ui.get('/login', t1.cookie).then(async (r) => csrfIn(await r.text())!);
    expect((await ui.post('/login', { csrf: t1.csrf, org_id: a.org_id, api_token: a.api_token }, t1.cookie)).status).toBe(303);
    expect((await ui.post('/login', { csrf: t2, org_id: a.org_id, api_token: a.api_token }, t1.cookie)).status).toBe(303);
  });

  it('200 posts with a 1 MB org id: each 4xx, RSS grows by at most 64 MiB, /healthz 200, and B still signs in', async () => {
    const rss = () => Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${svc.proc.pid}/status`, 'utf8'))![1]) * 1024;
    const ui = browser(dash);
    const f = await ui.form();
    const body = `csrf=${encodeURIComponent(f.csrf)}&org_id=${'o'.repeat(1_000_000)}&api_token=x`;
    const before = rss();
    let peak = before;
    const statuses = new Map<number, number>();
    for (let i = 0; i < 200; i++) {
      const r = await fetch(`${dash}/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: f.cookie, 'x-forwarded-for': `10.0.${i >> 8}.${i & 255}` },
        body,
      });
      await r.arrayBuffer();
      statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
      peak = Math.max(peak, rss());
    }
    expect(
      [...statuses.keys()].every((s) => s >= 400 && s < 500),
      JSON.stringify([...statuses]),
    ).toBe(true);
    expect(statuses.get(413)).toBe(200);
    expect(peak - before).toBeLessThanOrEqual(64 * 1024 * 1024);
    expect((await fetch(`${svc.url}/healthz`)).status).toBe(200);
    // a body just over 8 KiB is refused too; a form with a well-formed id still works
    const over = await fetch(`${dash}/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: `org_id=${'o'.repeat(8 * 1024)}`,
    });
    expect(over.status).toBe(413);
    expect((await ui.signIn(b.org_id, b.api_token)).status).toBe(303);
  }, 120_000);
});

describe('without --trust-proxy (in process)', () => {
  const clock = new ManualClock(Date.now());
  let svc: TestService;
  let a: OrgCreds;
  let b: OrgCreds;
  let dash: string;
  const at2 = new Agent({ localAddress: '127.0.0.2' });

  beforeAll(async () => {
    svc = await startService({ localRunner: false }, { clock });
    a = svc.createOrg('signin-direct-a');
    b = svc.createOrg('signin-direct-b');
    dash = `${svc.url}/dashboard`;
  });
  afterAll(async () => {
    await at2.close();
    await svc?.stop();
  });

  it('failures from a socket bound to 127.0.0.2 lock out that address only; X-Forwarded-For is ignored (no escape, no framing)', async () => {
    const from2 = browser(dash, at2);
    for (let i = 0; i < 5; i++) expect((await from2.signIn(b.org_id, a.api_token)).status).toBe(401);
    // a header naming another address changes nothing: the connection's address counts
    expect((await from2.signIn(b.org_id, b.api_token, { 'x-forwarded-for': '10.9.9.9' })).status).toBe(429);
    // B, from 127.0.0.1, even when it claims to be 127.0.0.2
    const here = browser(dash);
    expect((await here.signIn(b.org_id, b.api_token, { 'x-forwarded-for': '127.0.0.2' })).status).toBe(303);
    // A's org from 127.0.0.2 is not affected either
    expect((await from2.signIn(a.org_id, a.api_token)).status).toBe(303);
    // a minute later 127.0.0.2 is heard again
    clock.advance(61_000);
    expect((await from2.signIn(b.org_id, b.api_token)).status).toBe(303);
  });

  it('the back-off follows at most 10,000 keys of at most 130 characters, whatever is posted', () => {
    const t = new SignInThrottle(clock);
    for (let i = 0; i < SIGN_IN_MAX_KEYS + 5000; i++) t.failed(`${'f'.repeat(500)}${i}`, `org_${i}`);
    expect(t.size).toBe(SIGN_IN_MAX_KEYS);
    const keys = [...(t as unknown as { failures: Map<string, number[]> }).failures.keys()];
    expect(Math.max(...keys.map((k) => Buffer.byteLength(k)))).toBeLessThanOrEqual(200);
  });

  it('a login form opened 60 s earlier signs in while another client posts 1,000 sign-ins a second (11,000 of them)', async () => {
    const victim = browser(dash);
    const opened = await victim.form();
    clock.advance(60_000);
    // the other client: each post with a fresh form (the one its last answer carried), 1,000 posts a
    // second of the server's clock; 11,000 of them, more than the 10,000 used tokens svc remembered
    const flooder = browser(dash, at2);
    const statuses = new Map<number, number>();
    let next = 0;
    await Promise.all(
      Array.from({ length: 4 }, async () => {
        let f = await flooder.form();
        while (next < 11_000) {
          next++;
          const r = await flooder.post('/login', { csrf: f.csrf, org_id: 'nobody_here', api_token: 'wrong' }, f.cookie);
          statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
          f = { cookie: f.cookie, csrf: csrfIn(await r.text()) ?? (await flooder.form()).csrf };
          clock.advance(1);
        }
      }),
    );
    // each of the flood's forms was good once (401, then 429 from its address), none refused as used
    expect(statuses.get(403), JSON.stringify([...statuses])).toBeUndefined();
    const signedIn = await victim.post('/login', { csrf: opened.csrf, org_id: b.org_id, api_token: b.api_token }, opened.cookie);
    expect(signedIn.status).toBe(303);
    expect(cookieOf(signedIn, 'svc_session')).toBeDefined();
    // and once only
    expect((await victim.post('/login', { csrf: opened.csrf, org_id: b.org_id, api_token: b.api_token }, opened.cookie)).status).toBe(403);
  }, 240_000);

  it('used login tokens are remembered in bounded memory that no flood can fill: an unused form stays good until it expires', () => {
    const t0 = 1_000_000;
    const csrf = new LoginCsrf(Buffer.alloc(32, 7), t0);
    const cookie = 'c'.repeat(43);
    const early = csrf.token(cookie, t0)!; // issued first, used last
    // 100,000 forms served and used over the next 50 s (2,000 a second)
    let now = t0 + 10_000;
    for (let i = 0; i < 100_000; i++) {
      now = t0 + 10_000 + Math.floor(i / 2);
      const tok = csrf.token(cookie, now)!;
      expect(csrf.consume(cookie, tok, now)).toBe(true);
      if (i % 9_973 === 0) expect(csrf.consume(cookie, tok, now)).toBe(false);
    }
    // about 2,000 bits a second: 50 seconds of them
    expect(csrf.memory.seconds).toBeLessThanOrEqual(52);
    expect(csrf.memory.bytes).toBeLessThanOrEqual(52 * 512);
    expect(csrf.consume(cookie, early, now)).toBe(true);
    expect(csrf.consume(cookie, early, now)).toBe(false);
    // at most MAX_FORMS_PER_SECOND forms in one second; the next second serves again
    const busy = t0 + 100_000;
    let served = 0;
    while (csrf.token(cookie, busy) !== undefined) served++;
    expect(served).toBe(MAX_FORMS_PER_SECOND);
    expect(csrf.token(cookie, busy + 1000)).toBeDefined();
    // an hour on, the expired seconds are forgotten, and their tokens refused
    const later = busy + LOGIN_FORM_TTL_MS + 5_000;
    const last = csrf.token(cookie, later)!;
    expect(csrf.memory.seconds).toBeLessThanOrEqual(2);
    expect(csrf.consume(cookie, early.replace(/^\d+/, String(t0)), later)).toBe(false);
    expect(csrf.consume(cookie, last, later)).toBe(true);
    // a token is good only with its cookie and as served (another serial: its signature fails)
    const other = csrf.token(cookie, later)!;
    expect(csrf.consume('d'.repeat(43), other, later)).toBe(false);
    expect(csrf.consume(cookie, other.replace(/\.\d+\./, '.999.'), later)).toBe(false);
    expect(csrf.consume(cookie, other, later)).toBe(true);
    // a token issued before the process started is refused
    expect(new LoginCsrf(Buffer.alloc(32, 7), later + 1).consume(cookie, csrf.token(cookie, later)!, later + 2)).toBe(false);
  });
});
