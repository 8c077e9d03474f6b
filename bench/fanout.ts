// What the two yardsticks of the comparison share (bench/baseline.ts, the bare floor, and
// bench/peer.ts, the Redis + BullMQ peer): the prebuilt CloudEvent body and the per-webhook lanes
// that POST it with svc's bounds. Kept in one place so that the floor and the peer send the same
// bytes the same way, and differ only in what each adds (the peer: a durable queue, a process-wide
// bound, a timeout and a signature).
import { createHmac } from 'node:crypto';
import type { Dispatcher } from 'undici';
import { toCloudEvent, sourceFor } from '../src/events/cloudevent.ts';
import { CE_CONTENT_TYPE } from '../src/delivery/client.ts';
import { PER_WEBHOOK_IN_FLIGHT } from '../src/dataplane/pipeline.ts';

/** Connections per origin: svc's Deliverer default. */
export const CONNECTIONS_PER_ORIGIN = 64;
/** POSTs in flight per webhook at most (svc's bound); the rest wait in order. */
export { PER_WEBHOOK_IN_FLIGHT };
/** The base URL svc would stamp into `source` and the dashboard link: only the size matters. */
const TEMPLATE_BASE_URL = 'http://127.0.0.1:8080';

/**
 * A body of the shape and size svc delivers for an external workflow `started`, built once with
 * svc's own toCloudEvent and split at the workflow id, so that a body per fact is one join.
 */
export function cloudEventTemplate(orgId: string): string[] {
  const SENTINEL = 'bwf_SENTINEL';
  const ev = toCloudEvent(
    {
      kind: 'workflow',
      transition: 'started',
      org_id: orgId,
      time: new Date().toISOString(),
      workflow: { id: SENTINEL, type: 'provision', owner_id: 'inst_bench', owner_type: 'installs' },
      install_id: 'inst_bench',
    },
    { source: sourceFor(TEMPLATE_BASE_URL), baseUrl: TEMPLATE_BASE_URL, dashboardUrl: `${TEMPLATE_BASE_URL}/dashboard` },
  );
  if (!ev) throw new Error('the template event is not classified');
  return JSON.stringify(ev).split(SENTINEL);
}

/** The body for one workflow id, from a template. */
export function eventBody(template: string[], workflowId: string): Buffer {
  return Buffer.from(template.join(workflowId), 'utf8');
}

/** Lowercase hex HMAC-SHA256 of the body (the form of svc's X-Svc-Signature). */
export function hmacHex(secret: string, body: Buffer): string {
  return createHmac('sha256', secret).update(body).digest('hex');
}

/**
 * A process-wide bound on POSTs in flight, all webhooks together (svc's --delivery-concurrency).
 * A lane that finds no slot waits in a FIFO and is woken when one frees, so no webhook starves.
 */
export class ProcessSlots {
  private free: number;
  private readonly waiting: WebhookLane[] = [];
  constructor(readonly limit: number) {
    this.free = limit;
  }

  /** A slot for `lane` now, or false (the lane is woken by release() later). */
  take(lane: WebhookLane): boolean {
    if (this.free > 0) {
      this.free--;
      return true;
    }
    if (!lane.waitingForSlot) {
      lane.waitingForSlot = true;
      this.waiting.push(lane);
    }
    return false;
  }

  release(): void {
    this.free++;
    while (this.free > 0 && this.waiting.length) {
      const lane = this.waiting.shift()!;
      lane.waitingForSlot = false;
      lane.pump();
    }
  }
}

export interface LaneOptions {
  /** the process-wide bound; none for the floor */
  slots?: ProcessSlots;
  /** whole-exchange timeout per POST; none for the floor */
  timeoutMs?: number;
  /** the secret of X-Svc-Signature; unsigned for the floor */
  secret?: string;
  /** each POST's outcome (any 2xx is delivered) */
  outcome?: (delivered: boolean, err: unknown) => void;
}

interface Pending {
  body: Buffer;
  done: (() => void) | undefined;
}

/** One webhook: at most PER_WEBHOOK_IN_FLIGHT POSTs in flight on the shared pool, the rest queued in order. */
export class WebhookLane {
  /** set by ProcessSlots while this lane waits for a process-wide slot */
  waitingForSlot = false;
  private inFlight = 0;
  private readonly queue: Pending[] = [];
  constructor(
    private readonly pool: Dispatcher,
    private readonly path: string,
    private readonly opts: LaneOptions = {},
  ) {}

  /** POST `body` once a slot is free; `done` once it has an outcome. */
  offer(body: Buffer, done?: () => void): void {
    this.queue.push({ body, done });
    this.pump();
  }

  pump(): void {
    while (this.inFlight < PER_WEBHOOK_IN_FLIGHT && this.queue.length) {
      if (this.opts.slots && !this.opts.slots.take(this)) return;
      this.send(this.queue.shift()!);
    }
  }

  private send({ body, done }: Pending): void {
    this.inFlight++;
    const o = this.opts;
    const headers: Record<string, string> = { 'content-type': CE_CONTENT_TYPE };
    if (o.secret !== undefined) headers['x-svc-signature'] = hmacHex(o.secret, body);
    this.pool
      .request({ method: 'POST', path: this.path, headers, body, signal: o.timeoutMs ? AbortSignal.timeout(o.timeoutMs) : undefined })
      .then(async (res) => {
        await res.body.dump();
        o.outcome?.(res.statusCode >= 200 && res.statusCode < 300, null);
      })
      .catch((err: unknown) => o.outcome?.(false, err))
      .finally(() => {
        this.inFlight--;
        o.slots?.release();
        done?.();
        this.pump();
      });
  }
}
