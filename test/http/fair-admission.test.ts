// The fair admission of HTTP requests (src/http/fair-admission.ts, CONTRACT §8): a queue per org,
// started round robin one per turn of the event loop (here: one per step the test takes), seats
// held until the response is produced, at most --api-queue-per-org waiting, one more 429.
import { Hono } from 'hono';
import { describe, expect, it } from 'vitest';
import { FairAdmission, RateLimitedError, type Seat } from '../../src/http/fair-admission.ts';
import { createMetrics } from '../../src/metrics.ts';

/** An admission whose turns the test runs: step() starts what one turn of the loop would. */
function stepped(o: { queuePerOrg: number; seats?: number; seatsPerOrg?: number }) {
  const turns: Array<() => void> = [];
  const metrics = createMetrics();
  const admission = new FairAdmission({ ...o, metrics, defer: (fn) => turns.push(fn) });
  const started: string[] = [];
  const seats = new Map<string, Seat>();
  const admit = (org: string, id: string) =>
    admission.admit(org).then((s) => {
      started.push(id);
      seats.set(id, s!);
    });
  /** run the turns due now, and let what they started run */
  const step = async () => {
    for (const t of turns.splice(0)) t();
    await new Promise((r) => setImmediate(r));
  };
  const limited = async () => (await metrics.rateLimited.get()).values.find((v) => v.labels.what === 'api')?.value ?? 0;
  return { admission, admit, step, started, seats, limited, turns };
}

describe('FairAdmission', () => {
  it("starts one request a turn, taking the orgs in turn: B waits for one of A's, not for all of them", async () => {
    const t = stepped({ queuePerOrg: 100, seats: 64 });
    for (let i = 1; i <= 4; i++) void t.admit('org_a', `a${i}`);
    void t.admit('org_b', 'b1');
    void t.admit('org_b', 'b2');
    expect(t.started).toEqual([]); // nothing starts inline, as it arrives
    for (let i = 0; i < 6; i++) {
      await t.step();
      for (const s of t.seats.values()) s.release(); // each a synchronous handler: done within its turn
    }
    expect(t.started).toEqual(['a1', 'b1', 'a2', 'b2', 'a3', 'a4']);
    expect(t.admission.running).toBe(0);
  });

  it("holds a seat until it is released: an org at its seats waits while another org's requests start", async () => {
    const t = stepped({ queuePerOrg: 100, seats: 3, seatsPerOrg: 2 });
    for (let i = 1; i <= 4; i++) void t.admit('org_a', `a${i}`);
    for (let i = 0; i < 4; i++) await t.step();
    expect(t.started).toEqual(['a1', 'a2']); // A's two seats held (I/O under way): A's others wait
    void t.admit('org_b', 'b1');
    void t.admit('org_b', 'b2');
    for (let i = 0; i < 4; i++) await t.step();
    expect(t.started).toEqual(['a1', 'a2', 'b1']); // the last of 3 seats
    t.seats.get('a1')!.release();
    t.seats.get('a1')!.release(); // a second release changes nothing
    for (let i = 0; i < 4; i++) await t.step();
    expect(t.started).toEqual(['a1', 'a2', 'b1', 'a3']); // B had its turn (b1): A's now
    t.seats.get('b1')!.release();
    for (let i = 0; i < 4; i++) await t.step();
    expect(t.started).toEqual(['a1', 'a2', 'b1', 'a3', 'b2']);
    expect(t.admission.running).toBe(3);
  });

  it("refuses an org's request past its bound of waiting ones with a retry time, counted, and still admits another org's", async () => {
    const t = stepped({ queuePerOrg: 3 });
    for (let i = 1; i <= 3; i++) void t.admit('org_a', `a${i}`);
    const refused = t.admission.admit('org_a').catch((e: unknown) => e);
    const err = await refused;
    expect(err).toBeInstanceOf(RateLimitedError);
    expect((err as RateLimitedError).status).toBe(429);
    expect((err as RateLimitedError).code).toBe('rate_limited');
    expect((err as RateLimitedError).retryAfterS).toBeGreaterThanOrEqual(1);
    expect((err as RateLimitedError).message).toContain('3');
    expect(await t.limited()).toBe(1);
    void t.admit('org_b', 'b1');
    await t.step();
    await t.step();
    expect(t.started).toEqual(['a1', 'b1']);
    // once one of A's has started, its queue has room for one more
    void t.admit('org_a', 'a4');
    await expect(t.admission.admit('org_a')).rejects.toBeInstanceOf(RateLimitedError);
    expect(await t.limited()).toBe(2);
  });

  it('does not start a request whose client went away while it waited', async () => {
    const t = stepped({ queuePerOrg: 10 });
    let gone = false;
    const a = t.admission.admit('org_a', () => gone);
    gone = true;
    await t.step();
    await expect(a).resolves.toBeNull();
    expect(t.admission.running).toBe(0);
  });

  it('answers 429 rate_limited (CONTRACT 3) with Retry-After as middleware, and runs the others', async () => {
    const admission = new FairAdmission({ queuePerOrg: 1, seats: 1 });
    let open: () => void = () => {};
    const gate = new Promise<void>((r) => (open = r));
    const app = new Hono();
    app.use(
      '*',
      admission.middleware((c) => c.req.header('x-org')),
    );
    app.get('/slow', async (c) => (await gate, c.json({ ok: true })));
    const get = (org: string) => app.request('/slow', { headers: { 'x-org': org } });
    const first = get('org_a'); // holds its seat until the gate opens
    await new Promise((r) => setImmediate(r));
    await new Promise((r) => setImmediate(r));
    expect(admission.running).toBe(1);
    const second = get('org_a'); // A's one waiting request
    await new Promise((r) => setImmediate(r));
    const third = await get('org_a');
    expect(third.status).toBe(429);
    expect(Number(third.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(await third.json()).toEqual({ error: 'rate_limited', message: expect.stringContaining('--api-queue-per-org') });
    const other = get('org_b');
    open();
    expect((await first).status).toBe(200);
    expect((await second).status).toBe(200);
    expect((await other).status).toBe(200);
    expect(admission.running).toBe(0);
    expect(admission.waitingCount).toBe(0);
  });
});
