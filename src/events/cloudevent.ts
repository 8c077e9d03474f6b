// Fact -> CloudEvents 1.0 envelope (spec 6.3-6.5, CONTRACT 6.2). What differs by kind is in kinds/.
import { randomFillSync } from 'node:crypto';
import type { Fact } from '../domain/facts.ts';
import { classify, type Classification } from './classify.ts';
import { slugsFor } from './slugs.ts';
import { linksFor } from './links.ts';
import { kindOf } from './kinds/index.ts';
import { routeOf, type LabelLookup } from './routing.ts';
import type { EventRoute } from '../domain/event-route.ts';

export interface CloudEvent {
  specversion: '1.0';
  id: string;
  type: string;
  source: string;
  time: string;
  subject: string;
  datacontenttype: 'application/json';
  /** the absolute URL of the JSON Schema of this type's events (CONTRACT 10.3), see dataschemaFor() */
  dataschema: string;
  svcorgid: string;
  svckind: string;
  svctransition: string;
  /** the ordering key (CONTRACT 10.1); absent on pings */
  svcorderkey?: string;
  /** the CloudEvents sequence extension: 20-digit zero-padded, contiguous per org and key from 1; absent on pings */
  sequence?: string;
  interests: string[];
  data: Record<string, unknown>;
}

export interface EnvelopeOptions {
  /** '//<authority>/ctl-api', see sourceFor() */
  source: string;
  /** --base-url (without a trailing slash): `dataschema` is the type's schema URL under it */
  baseUrl: string;
  dashboardUrl: string;
  /** CloudEvents id; a fresh UUID when omitted */
  id?: string;
  /**
   * The next sequence of an ordering key (CONTRACT 10.1), taken in the transaction that emits the
   * event: called once per event made, never for a fact that makes none. Absent: no key, no sequence.
   */
  sequence?: (orgId: string, orderKey: string) => number;
}

/** `sequence` as the CloudEvent carries it: 20 decimal digits, zero-padded (it sorts as text too). */
export function sequenceText(n: number): string {
  return String(n).padStart(20, '0');
}

export { MAX_PLAN_BYTES } from './kinds/workflow_step_approval.ts';

/** Random bytes taken by eventId, refilled from the system's CSPRNG when used up (each byte used once). */
const RANDOM_POOL = Buffer.alloc(4096);
let randomAt = RANDOM_POOL.length;
/** The id being written: its time part (kept while the ms stays the same), then the random part. */
const ID = Buffer.from('00000000-0000-7000-8000-000000000000', 'latin1');
let idMs = -1;
const HEX = Buffer.from('0123456789abcdef', 'latin1');
/** Where an id's 18 random hex digits go (after its version digit 7, and around its variant digit). */
const RANDOM_DIGITS = [15, 16, 17, 20, 21, 22, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35];
const VARIANT_DIGIT = 19;

/**
 * A new event id: a UUID (RFC 9562 version 7) whose first 48 bits are the time in ms, the rest
 * random (74 bits). Unique per event as CONTRACT 6.2 asks; ordered by time, so that the unique
 * indexes on event_id (outbox, events) take each commit's ids at their end, a few pages, instead
 * of one random page per event for the commit to write (a random v4 id did that). Written as bytes
 * and read as one string: a fifth of the time of a random UUID cut and joined, and one string
 * instead of six per event (issue 33).
 */
export function eventId(nowMs = Date.now()): string {
  if (nowMs !== idMs) {
    idMs = nowMs;
    const ms = nowMs.toString(16).padStart(12, '0');
    ID.write(ms.slice(0, 8), 0, 'latin1');
    ID.write(ms.slice(8, 12), 9, 'latin1');
  }
  if (randomAt + 10 > RANDOM_POOL.length) {
    randomFillSync(RANDOM_POOL);
    randomAt = 0;
  }
  for (let i = 0; i < 9; i++) {
    const b = RANDOM_POOL[randomAt + i];
    ID[RANDOM_DIGITS[2 * i]] = HEX[b >> 4];
    ID[RANDOM_DIGITS[2 * i + 1]] = HEX[b & 15];
  }
  ID[VARIANT_DIGIT] = HEX[8 | (RANDOM_POOL[randomAt + 9] & 3)]; // 10xx: 8, 9, a or b
  randomAt += 10;
  return ID.toString('latin1');
}

/** `//<host[:port] of baseUrl>/ctl-api` */
export function sourceFor(baseUrl: string): string {
  return `//${new URL(baseUrl).host}/ctl-api`;
}

/** `<base-url>/v1/event-types/<type>/schema`: the JSON Schema of a type's whole CloudEvent (CONTRACT 10.3) */
export function dataschemaFor(baseUrl: string, type: string): string {
  let byType = dataschemas.get(baseUrl);
  if (!byType) dataschemas.set(baseUrl, (byType = new Map()));
  let url = byType.get(type);
  if (url === undefined) {
    url = `${baseUrl.replace(/\/+$/, '')}/v1/event-types/${encodeURIComponent(type)}/schema`;
    byType.set(type, url);
  }
  return url;
}

/** dataschemaFor's answers, by base URL and type: a few strings, made once instead of once per event. */
const dataschemas = new Map<string, Map<string, string>>();

export function ceType(fact: Fact): string {
  return kindOf(fact).type;
}

export function ceSubject(fact: Fact): string {
  return kindOf(fact).subject(fact);
}

/** data per CONTRACT 6.2: kind, transition, org_id first; the kind's own fields; links last. */
export function ceData(fact: Fact, dashboardUrl: string): Record<string, unknown> {
  return {
    kind: fact.kind,
    transition: fact.transition,
    org_id: fact.org_id,
    ...kindOf(fact).data.build(fact, dashboardUrl),
    links: linksFor(fact, dashboardUrl),
  };
}

/** The CloudEvent of a fact; null when the fact is not classified (never for a direct kind: ping). */
export function toCloudEvent(fact: Fact, opts: EnvelopeOptions): CloudEvent | null {
  return envelope(fact, classify(fact), opts);
}

function envelope(fact: Fact, cls: Classification | null, opts: EnvelopeOptions): CloudEvent | null {
  const kind = kindOf(fact);
  if (!cls && !kind.direct) return null;
  const key = opts.sequence ? kind.orderKey(fact) : null;
  const id = opts.id ?? eventId();
  const type = ceType(fact);
  const subject = ceSubject(fact);
  const interests = slugsFor(fact, cls);
  const data = ceData(fact, opts.dashboardUrl);
  if (key === null) {
    return {
      specversion: '1.0',
      id,
      type,
      source: opts.source,
      time: fact.time,
      subject,
      datacontenttype: 'application/json',
      dataschema: dataschemaFor(opts.baseUrl, type),
      svcorgid: fact.org_id,
      svckind: fact.kind,
      svctransition: fact.transition,
      interests,
      data,
    };
  }
  return {
    specversion: '1.0',
    id,
    type,
    source: opts.source,
    time: fact.time,
    subject,
    datacontenttype: 'application/json',
    dataschema: dataschemaFor(opts.baseUrl, type),
    svcorgid: fact.org_id,
    svckind: fact.kind,
    svctransition: fact.transition,
    svcorderkey: key,
    sequence: sequenceText(opts.sequence!(fact.org_id, key)),
    interests,
    data,
  };
}

/** An event ready for the outbox: the envelope, its exact bytes, and its route (computed here, once). */
export interface EmittedEvent {
  id: string;
  type: string;
  /** the CloudEvents subject */
  subject: string;
  body: string;
  route: EventRoute;
  /** its ordering key and sequence (CONTRACT 10.1); null when it has none (EmitOptions without `sequence`) */
  orderKey: string | null;
  sequence: number | null;
}

export interface EmitOptions extends EnvelopeOptions {
  labels: LabelLookup;
  /** the webhook registry revision the event must be matched against */
  rev: number;
}

/** The event of a fact with its route; null when the fact is not delivered (not classified). */
export function emit(fact: Fact, opts: EmitOptions): EmittedEvent | null {
  const cls = classify(fact);
  const ev = envelope(fact, cls, opts);
  if (!ev) return null;
  return {
    id: ev.id,
    type: ev.type,
    subject: ev.subject,
    body: JSON.stringify(ev),
    route: routeOf(fact, ev.type, cls, opts.labels, opts.rev, ev.svcorderkey ?? null),
    orderKey: ev.svcorderkey ?? null,
    sequence: ev.sequence === undefined ? null : Number(ev.sequence),
  };
}
