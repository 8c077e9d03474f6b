// HTTP requests admitted fairly between orgs (CONTRACT §8), as Kubernetes API Priority and
// Fairness does it: a request of an org, once authenticated, waits in its org's queue; requests
// are started from the queues round robin, each taking a seat that it holds until its response is
// produced; at most `queuePerOrg` of an org's requests wait, and one more is answered 429
// `rate_limited` with Retry-After (counted svc_rate_limited_total{what="api"}).
//
// Most handlers run synchronously on the engine's thread, so a count of requests is not what they
// cost (an org's `GET /v1/events?limit=500` costs a hundred times a webhook read). What bounds
// another org's wait is that no request starts inline: each is queued, and one is started per turn
// of the event loop, after the loop has read whatever arrived meanwhile. A request that arrives
// beside another org's 32 heavy reads then waits for the one under way and for at most one of that
// org's turns, not for all 32 (without this, node runs them back to back as they are read).
// Seats bound what runs at once while handlers wait on I/O (a ping, a verification): SEATS in
// all, SEATS_PER_ORG for one org, so an org whose requests hang holds only its own seats.
import type { Context, Env, MiddlewareHandler } from 'hono';
import { performance } from 'node:perf_hooks';
import { FairQueue } from '../domain/fair-queue.ts';
import type { RequestAdmission } from '../context.ts';
import type { Metrics } from '../metrics.ts';
import { noteTurnCause } from '../engine/turns.ts';
import { errorResponse, HttpError } from './http-error.ts';

/** Requests running at once (holding a seat), all orgs together. */
export const SEATS = 64;
/** ...and of one org. */
export const SEATS_PER_ORG = 16;

/** A 429 `rate_limited` (CONTRACT 3): the org's queue is full; Retry-After says when to come back. */
export class RateLimitedError extends HttpError {
  constructor(
    message: string,
    readonly retryAfterS: number,
  ) {
    super(429, 'rate_limited', message);
  }
}

/** A started request's seat: released once, when its response is produced (or it failed). */
export interface Seat {
  release(): void;
}

export interface FairAdmissionOptions {
  /** an org's requests waiting at most; one more is 429 (0: no bound) */
  queuePerOrg: number;
  seats?: number;
  seatsPerOrg?: number;
  metrics?: Pick<Metrics, 'rateLimited'>;
  /** runs the next start after what the event loop has to read (setImmediate; tests step it by hand) */
  defer?: (fn: () => void) => void;
}

interface Waiter {
  orgId: string;
  /** a seat; null: the client went away while the request waited (it is not started) */
  start: (seat: Seat | null) => void;
  gone: () => boolean;
}

export class FairAdmission implements RequestAdmission {
  private readonly waiting = new FairQueue<Waiter>();
  private readonly seated = new Map<string, number>();
  private inUse = 0;
  private scheduled = false;
  private readonly seats: number;
  private readonly seatsPerOrg: number;
  private readonly defer: (fn: () => void) => void;
  /** what a request holds its seat for, recent mean (ms): the Retry-After estimate */
  private msPerRequest = 5;

  constructor(private readonly opts: FairAdmissionOptions) {
    this.seats = opts.seats ?? SEATS;
    this.seatsPerOrg = Math.min(opts.seatsPerOrg ?? SEATS_PER_ORG, this.seats);
    this.defer = opts.defer ?? ((fn) => setImmediate(fn));
  }

  /** Requests waiting, all orgs together. */
  get waitingCount(): number {
    return this.waiting.size;
  }

  /** Requests holding a seat. */
  get running(): number {
    return this.inUse;
  }

  /**
   * Wait for a seat for a request of `orgId`: resolves once it may run (hold the seat until its
   * response is produced, then release it), or with null when `gone()` says its client went away
   * meanwhile. Rejects with RateLimitedError at once when the org already has its bound of requests waiting.
   */
  admit(orgId: string, gone: () => boolean = () => false): Promise<Seat | null> {
    const bound = this.opts.queuePerOrg;
    if (bound > 0 && this.waiting.sizeOf(orgId) >= bound) {
      this.opts.metrics?.rateLimited.inc({ what: 'api' });
      // the org's queue drains at its share of the starts: at least one request's time per waiting request
      const retryAfterS = Math.min(60, Math.max(1, Math.ceil((bound * this.msPerRequest) / 1000)));
      return Promise.reject(
        new RateLimitedError(
          `more than ${bound} requests of this org are waiting (--api-queue-per-org); retry after ${retryAfterS} s`,
          retryAfterS,
        ),
      );
    }
    return new Promise<Seat | null>((start) => {
      this.waiting.push(orgId, { orgId, start, gone });
      this.schedule();
    });
  }

  /** The admission as middleware, after authentication: `orgOf` names the request's org. */
  middleware<E extends Env>(orgOf: (c: Context<E>) => string | undefined): MiddlewareHandler<E> {
    return async (c, next) => {
      const orgId = orgOf(c);
      if (!orgId) return next();
      let seat: Seat | null;
      try {
        const signal = c.req.raw.signal;
        seat = await this.admit(orgId, () => signal.aborted);
      } catch (err) {
        if (!(err instanceof RateLimitedError)) throw err;
        c.header('retry-after', String(err.retryAfterS));
        return errorResponse(c, err);
      }
      // nobody reads this answer: the connection is closed
      if (!seat) return new Response(null, { status: 499 });
      noteTurnCause(`${c.req.method} ${c.req.path}`);
      try {
        await next();
      } finally {
        seat.release();
      }
    };
  }

  private schedule(): void {
    if (this.scheduled || this.waiting.size === 0 || this.inUse >= this.seats) return;
    this.scheduled = true;
    this.defer(() => this.startNext());
  }

  /** Start one request (round robin between the orgs with a seat to spare), then the next turn. */
  private startNext(): void {
    this.scheduled = false;
    let w: Waiter | undefined;
    const ready = (orgId: string) => (this.seated.get(orgId) ?? 0) < this.seatsPerOrg;
    while (this.inUse < this.seats && (w = this.waiting.next(ready)) !== undefined) {
      if (w.gone()) {
        w.start(null);
        continue;
      }
      this.seat(w);
      break;
    }
    this.schedule();
  }

  private seat(w: Waiter): void {
    this.inUse++;
    this.seated.set(w.orgId, (this.seated.get(w.orgId) ?? 0) + 1);
    const started = performance.now();
    let released = false;
    w.start({
      release: () => {
        if (released) return;
        released = true;
        this.inUse--;
        const n = (this.seated.get(w.orgId) ?? 1) - 1;
        if (n > 0) this.seated.set(w.orgId, n);
        else this.seated.delete(w.orgId);
        this.msPerRequest = 0.9 * this.msPerRequest + 0.1 * (performance.now() - started);
        this.schedule();
      },
    });
  }
}
