// The durable hop's unit (NATS mode, ARCHITECTURE "the durable hop pays its fixed costs per batch"):
// one JetStream message on `svc.hop.events` carries a batch of outbox events, so that the seal, the
// publish, JetStream's store, delivery, ack and removal, and the data plane's progress record are
// paid once per batch instead of once per event. The message id (Nats-Msg-Id) is the batch's id,
// fixed when its events were committed (store/outbox.ts `batch`), so a batch published again after
// a crash is a JetStream duplicate, whatever else the relay has published since.
//
// Wire format (the seal covers all of it, src/bus/seal.ts sealHop):
//
//   {"v":1,"e":[[<event id>,<encoded route>,<body bytes>],…]}\n<body 1><body 2>…
//
// Bodies are the exact CloudEvent bytes to POST, back to back, so a data plane takes each one as a
// slice of the message without copying or parsing it.

/** What one event of a batch carries. */
export interface HopEvent {
  id: string;
  /** the encoded route (src/domain/event-route.ts) */
  route: string;
  body: Buffer;
}

const NL = 0x0a;
const VERSION = 1;

/** Encode events (in order) as one hop message body. */
export function encodeHopBatch(events: ReadonlyArray<{ id: string; route: string; body: string | Buffer }>): Buffer {
  const bodies = events.map((e) => (typeof e.body === 'string' ? Buffer.from(e.body, 'utf8') : e.body));
  const head = JSON.stringify({ v: VERSION, e: events.map((e, i) => [e.id, e.route, bodies[i].length]) });
  return Buffer.concat([Buffer.from(`${head}\n`, 'utf8'), ...bodies]);
}

/** The events of a hop message body, or null when it is not one (bodies are slices of `data`). */
export function decodeHopBatch(data: Uint8Array): HopEvent[] | null {
  const buf = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  const nl = buf.indexOf(NL);
  if (nl < 0) return null;
  let head: unknown;
  try {
    head = JSON.parse(buf.toString('utf8', 0, nl));
  } catch {
    return null;
  }
  if (!head || typeof head !== 'object') return null;
  const { v, e } = head as { v?: unknown; e?: unknown };
  if (v !== VERSION || !Array.isArray(e) || e.length === 0) return null;
  const out: HopEvent[] = [];
  let at = nl + 1;
  for (const item of e as unknown[]) {
    if (!Array.isArray(item) || item.length !== 3) return null;
    const [id, route, len] = item as unknown[];
    if (typeof id !== 'string' || !id || typeof route !== 'string' || typeof len !== 'number' || !Number.isInteger(len) || len < 0)
      return null;
    if (at + len > buf.length) return null;
    out.push({ id, route, body: buf.subarray(at, at + len) });
    at += len;
  }
  return at === buf.length ? out : null;
}
