// The durable hop's unit (NATS mode, ARCHITECTURE "the durable hop pays its fixed costs per batch"):
// one JetStream message on `svc.hop.events` carries a batch of outbox events, so that the seal, the
// publish, JetStream's store, delivery, ack and removal, and the data plane's progress record are
// paid once per batch instead of once per event. The message id (Nats-Msg-Id) is the batch's id,
// fixed when its events were committed (store/outbox.ts `batch`), so a batch published again after
// a crash is a JetStream duplicate, whatever else the relay has published since.
//
// Wire format (the seal covers all of it, src/bus/seal.ts sealHop):
//
//   {"v":1,"e":[[<event id>,<encoded route>,<body bytes>],…],"k":[<webhook id>,…]}\n<body 1><body 2>…
//
// `k` (optional, CONTRACT 10.1): the org's `per_key` webhooks when the relay published the batch.
// Their attempts at these events are made by the owners of SVC_ORDERED's partitions, from the copy
// the relay published there (same events, a message per partition, `k` the same): a hop batch's
// plane skips them, an ordered message's owner attempts only them. The set is fixed at publish
// time, so the two sides agree on it whatever either's registry says meanwhile.
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

/** Encode events (in order) as one hop message body; `ordered`: the `per_key` webhooks of their org (none: no `k`). */
export function encodeHopBatch(
  events: ReadonlyArray<{ id: string; route: string; body: string | Buffer }>,
  ordered: readonly string[] = [],
): Buffer {
  const bodies = events.map((e) => (typeof e.body === 'string' ? Buffer.from(e.body, 'utf8') : e.body));
  const e = events.map((ev, i) => [ev.id, ev.route, bodies[i].length]);
  const head = JSON.stringify(ordered.length ? { v: VERSION, e, k: ordered } : { v: VERSION, e });
  return Buffer.concat([Buffer.from(`${head}\n`, 'utf8'), ...bodies]);
}

/** The events of a hop message body, or null when it is not one (bodies are slices of `data`). */
export function decodeHopBatch(data: Uint8Array): HopEvent[] | null {
  return decodeHopMessage(data)?.events ?? null;
}

/** A hop message body: its events and its `per_key` webhooks (`k`, empty when absent), or null when it is not one. */
export function decodeHopMessage(data: Uint8Array): { events: HopEvent[]; ordered: string[] } | null {
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
  const { v, e, k } = head as { v?: unknown; e?: unknown; k?: unknown };
  if (v !== VERSION || !Array.isArray(e) || e.length === 0) return null;
  if (k !== undefined && (!Array.isArray(k) || !k.every((w) => typeof w === 'string'))) return null;
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
  return at === buf.length ? { events: out, ordered: (k as string[] | undefined) ?? [] } : null;
}

/** The partition of SVC_ORDERED an event of `org` with ordering key `key` goes to (FNV-1a of both). */
export function orderedPartition(org: string, key: string, partitions: number): number {
  let h = 0x811c9dc5;
  const text = `${org}\u0000${key}`;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193) >>> 0;
  return h % partitions;
}
