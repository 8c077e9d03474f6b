// A Deliverer for tests that sends signed attempts the way the data plane does (signatures of the
// webhook's secrets, webhook-id of the event).
import { Deliverer, type AttemptResult, type DelivererOptions } from '../../src/delivery/client.ts';
import { signatureHeaders, signingKeys, type SigningKeys } from '../../src/delivery/signing.ts';

export interface TestTarget {
  url: string;
  /** a secret, prepared keys, or none */
  secret: string | SigningKeys | null;
}

export interface TestDeliverer {
  readonly d: Deliverer;
  deliver(target: TestTarget, body: string | Buffer, opts?: { eventId?: string; nowMs?: number }): Promise<AttemptResult>;
  inFlight(): number;
  close(graceMs?: number): Promise<void>;
}

/** The event id of a CloudEvent body (webhook-id), or a fixed one. */
function idOf(body: Buffer): string {
  try {
    const id = (JSON.parse(body.toString('utf8')) as { id?: unknown }).id;
    return typeof id === 'string' ? id : 'evt_test';
  } catch {
    return 'evt_test';
  }
}

export function testDeliverer(opts: Partial<DelivererOptions> = {}): TestDeliverer {
  const d = new Deliverer({ timeoutMs: 5000, allowPrivateTargets: true, ...opts });
  const clock = opts.clock;
  return {
    d,
    deliver(target, body, o = {}) {
      const buf = typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
      const keys = typeof target.secret === 'string' ? signingKeys({ secret: target.secret }) : target.secret;
      const now = o.nowMs ?? clock?.now() ?? Date.now();
      return d.attempt(target.url, signatureHeaders(keys, o.eventId ?? idOf(buf), buf, now) as unknown as Record<string, string>, buf);
    },
    inFlight: () => d.inFlight(),
    close: (g) => d.close(g),
  };
}
