// One request of a verification gate (CONTRACT 4.3 `verification`): a signed POST of the
// `com.svc.rollout.verification.v1` CloudEvent to the verification URL, through the same target
// guard as deliveries (a private target refused unless --allow-private-targets; the connection
// goes to the address checked, never resolved again), no redirects followed, the timeout covering
// the whole exchange, at most 64 KiB of the answer read: unlike a delivery, the answer's body is
// the verdict. Never throws; errors name no URL path, query or secret.
import { Client } from 'undici';
import { systemClock, type Clock } from '../domain/clock.ts';
import { MAX_VERIFY_ANSWER_BYTES } from '../domain/verification.ts';
import { CE_CONTENT_TYPE } from './client.ts';
import { DeliveryTimeout, describeError } from './attempt-errors.ts';
import { checkTarget, pinnedConnect, type LookupAll } from './guard.ts';

export interface VerifyResponse {
  /** the HTTP status, when an answer came */
  status?: number;
  /** what was read of the answer's body (at most 64 KiB, UTF-8) */
  body?: string;
  /** why there was no (whole) answer */
  error?: string;
}

export interface VerifyRequestOptions {
  timeoutMs: number;
  allowPrivateTargets: boolean;
  /** the exchange's timeout runs on this clock (the delivery machinery's real time by default) */
  clock?: Clock;
  lookup?: LookupAll;
  /** aborts the request (the engine closing) */
  signal?: AbortSignal;
}

/** POST body to url once with these headers; resolves the answer, never rejects. */
export async function postVerification(
  url: string,
  headers: Record<string, string>,
  body: Buffer,
  o: VerifyRequestOptions,
): Promise<VerifyResponse> {
  const clock = o.clock ?? systemClock;
  const ac = new AbortController();
  const timer = clock.setTimeout(() => ac.abort(new DeliveryTimeout(o.timeoutMs)), o.timeoutMs);
  const onAbort = () => ac.abort(o.signal?.reason ?? new Error('aborted'));
  o.signal?.addEventListener('abort', onAbort, { once: true });
  let client: Client | null = null;
  try {
    const u = new URL(url);
    // the guard's lookup counts in the timeout too
    const aborted = new Promise<never>((_, reject) => ac.signal.addEventListener('abort', () => reject(ac.signal.reason), { once: true }));
    aborted.catch(() => {}); // an abort after the exchange (the engine closing) is nobody's error
    const resolved = await Promise.race([checkTarget(u, { allowPrivate: o.allowPrivateTargets, lookup: o.lookup }), aborted]);
    client = new Client(u.origin, { connect: pinnedConnect(u, resolved, o.timeoutMs) });
    const res = await client.request({
      method: 'POST',
      path: `${u.pathname || '/'}${u.search}`,
      headers: { 'content-type': CE_CONTENT_TYPE, 'user-agent': 'svc-verification/0.2', ...headers },
      body,
      signal: ac.signal,
    });
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of res.body) {
      const b = chunk as Buffer;
      const room = MAX_VERIFY_ANSWER_BYTES - size;
      chunks.push(b.length > room ? b.subarray(0, room) : b);
      size += Math.min(b.length, room);
      if (size >= MAX_VERIFY_ANSWER_BYTES) {
        res.body.destroy();
        break;
      }
    }
    return { status: res.statusCode, body: Buffer.concat(chunks).toString('utf8') };
  } catch (err) {
    const reason = ac.signal.aborted ? ac.signal.reason : err;
    return { error: err instanceof TypeError && !ac.signal.aborted ? 'invalid url' : describeError(reason, o.timeoutMs) };
  } finally {
    timer.cancel();
    o.signal?.removeEventListener('abort', onAbort);
    client?.destroy().catch(() => {});
  }
}
