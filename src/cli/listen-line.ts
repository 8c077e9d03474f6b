// `svc listen`'s printed lines (CONTRACT 7, new in 0.3): one line per delivery of at most 160
// characters (time, the path it arrived on, the type without `com.svc.` and `.vN`, the subject
// shortened in the middle when it must be, `sequence`, a mark for a recovery, resend or example,
// then what the event is about as far as it fits), the request headers for --verbose (signatures
// cut to their first 8 characters), and the warning when an ordering key's `sequence` skips.
// Characters are counted as code points; control characters are printed as spaces, so that no
// value can break a line in two.
import type http from 'node:http';
import { RECOVERY_HEADER, RESEND, SVC_SIGNATURE_HEADER, WEBHOOK_SIGNATURE_HEADER } from '../delivery/signing.ts';

/** No printed line is longer than this (code points). */
export const MAX_LINE = 160;
/** The subject keeps at least this much when details compete with it for the line. */
const MIN_SUBJECT = 48;
/** A detail cut at its end keeps at least this much (less is dropped instead). */
const MIN_CUT = 20;
/** Details that may be cut at their end (free text); an id cut short says nothing, so one that does not fit is left out. */
const CUTTABLE = /^(step|verdict|error|reason|last error|verification)\b/;
const SEP = '  ';
/** Header values shown only in part (--verbose): their first 8 characters. */
const REDACTED_HEADERS = new Set([SVC_SIGNATURE_HEADER, WEBHOOK_SIGNATURE_HEADER, 'authorization', 'proxy-authorization', 'cookie']);
const REDACT_KEEP = 8;

type Json = Record<string, unknown>;
const obj = (v: unknown): Json | undefined => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Json) : undefined);
const text = (v: unknown): string | undefined => (typeof v === 'string' && v ? v : undefined);

const width = (s: string): number => {
  let n = 0;
  for (const _ of s) n++;
  return n;
};
/** Control characters (a newline in a step name or an error) as spaces: a line stays one line. */
const oneLine = (s: string): string => s.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g, ' ');

/** s in at most n code points, cut at its end with … */
export function cutEnd(s: string, n: number): string {
  const cps = Array.from(s);
  if (cps.length <= n) return s;
  if (n <= 0) return '';
  return `${cps.slice(0, n - 1).join('')}…`;
}

/**
 * s in at most n code points, the middle replaced by …: at most 12 kept from the start (a subject's
 * org, the same on every line), the rest from the end, where a subject names its entity and transition.
 */
export function cutMiddle(s: string, n: number): string {
  const cps = Array.from(s);
  if (cps.length <= n) return s;
  if (n <= 1) return n === 1 ? '…' : '';
  const head = Math.min(12, Math.floor((n - 1) / 3));
  const tail = n - 1 - head;
  return `${cps.slice(0, head).join('')}…${cps.slice(cps.length - tail).join('')}`;
}

/** `com.svc.workflow_step.lifecycle.v1` -> `workflow_step.lifecycle`; another type as it is. */
export function shortType(type: string): string {
  return type.replace(/^com\.svc\./, '').replace(/\.v\d+$/, '');
}

/** HH:MM:SS of ms, in the local time zone. */
export function clockTime(ms: number): string {
  const d = new Date(ms);
  const p = (n: number) => String(n).padStart(2, '0');
  return `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

/** The path a request arrived on, without its query (which may carry a token). */
export function requestPath(url: string | undefined): string {
  const p = (url ?? '/').split('?')[0].split('#')[0];
  return p || '/';
}

const header = (h: http.IncomingHttpHeaders, name: string): string | undefined => {
  const v = h[name];
  return Array.isArray(v) ? v[0] : v;
};

/** `[resend]`, `[recovery]` or `[example]` (the `svcexample` extension), when the delivery is one. */
export function deliveryMark(headers: http.IncomingHttpHeaders, ev: Json | undefined): string | undefined {
  const r = header(headers, RECOVERY_HEADER)?.trim();
  // one recovery runs per webhook at a time (CONTRACT 4.5): its id is in the header (--verbose), not on the line
  if (r) return r === RESEND ? '[resend]' : '[recovery]';
  if (ev?.svcexample === true || ev?.svcexample === 'true') return '[example]';
  return undefined;
}

/** The event's `sequence` (CloudEvents sequence extension, a zero-padded decimal string) as a bigint; undefined when it has none. */
export function sequenceOf(ev: Json | undefined): bigint | undefined {
  const s = ev?.sequence;
  if (typeof s === 'string' && /^\d{1,30}$/.test(s)) return BigInt(s);
  if (typeof s === 'number' && Number.isSafeInteger(s) && s >= 0) return BigInt(s);
  return undefined;
}

/** A webhook watchdog event (`com.svc.webhook.delivery.v1`): its failure streak and the webhook's host. */
export function watchdogParts(ev: Json | undefined): string[] {
  const type = text(ev?.type) ?? '';
  if (!/webhook[._]delivery|watchdog/.test(type)) return [];
  const d = obj(ev?.data);
  const delivery = obj(d?.delivery);
  const webhook = obj(d?.webhook);
  const out: string[] = [];
  if (typeof delivery?.consecutive_failures === 'number') out.push(`failures: ${delivery.consecutive_failures} in a row`);
  if (text(webhook?.url_host)) out.push(`host: ${cutMiddle(text(webhook?.url_host)!, 48)}`);
  return out;
}

/**
 * What a person reading along needs of an event's data, as `key: value` parts, most telling first:
 * the workflow's type, a verification request's group, the step's name, a health verdict and its
 * reason, the error of a failed outcome, the runner, the install and component it acts on, a
 * watchdog event's last error. (An approval request's URL does not fit a line: it is in --json.)
 */
export function eventDetails(ev: Json | undefined): string[] {
  const d = obj(ev?.data);
  if (!d) return [];
  const wf = obj(d.workflow);
  const step = obj(d.step);
  const health = obj(d.health);
  const rollout = obj(d.rollout);
  const runner = obj(d.runner);
  const delivery = obj(d.delivery);
  const out: string[] = [];
  if (wf && !step && text(wf.type)) out.push(`workflow: ${text(wf.type)}`);
  // a verification request (its step's name says the same, longer)
  if (rollout && text(rollout.group) && typeof rollout.attempt === 'number')
    out.push(`verification of group ${text(rollout.group)}, attempt ${rollout.attempt}`);
  if (step && text(step.name)) out.push(`step: ${JSON.stringify(step.name)}`);
  if (health && text(health.verdict)) out.push(`verdict: ${text(health.verdict)}${text(health.reason) ? ` (${text(health.reason)})` : ''}`);
  const error = text(obj(d.outcome)?.error);
  if (error) out.push(`error: ${JSON.stringify(error)}`);
  if (runner && text(runner.name)) out.push(`runner: ${text(runner.name)}`);
  if (text(d.reason)) out.push(`reason: ${JSON.stringify(text(d.reason))}`);
  const install = text(d.install_id) ?? (wf?.owner_type === 'installs' ? text(wf.owner_id) : undefined) ?? text(rollout?.install_id);
  if (install) out.push(`install: ${install}`);
  const component = text(step?.component_id) ?? text(d.component_id) ?? text(health?.component_id);
  if (component) out.push(`component: ${component}`);
  if (delivery && text(delivery.last_error)) out.push(`last error: ${JSON.stringify(text(delivery.last_error))}`);
  return out;
}

export interface LineParts {
  /** when the delivery arrived (ms) */
  at: number;
  path: string;
  event: Json | undefined;
  /** a refusal (`BAD SIGNATURE (…)`), printed after the path */
  refusal?: string;
  /** recovery, resend or example */
  mark?: string;
  /** printed last, never dropped (`verified`, `answered: pass`) */
  trailer?: string[];
}

/**
 * The line of one delivery, at most MAX_LINE code points: time, path, type, subject, `seq N`, the
 * mark, a watchdog event's streak and host, then as many details as fit (the last one that does
 * not fit whole cut at its end), then the trailer. The subject is cut in the middle to what the
 * rest leaves, keeping at least MIN_SUBJECT against details.
 */
export function deliveryLine(p: LineParts): string {
  const ev = p.event;
  const clean = (s: string, n: number) => cutMiddle(oneLine(s), n);
  const head = [clockTime(p.at), clean(p.path, 32)];
  if (p.refusal) head.push(cutEnd(oneLine(p.refusal), 72));
  head.push(clean(shortType(text(ev?.type) ?? '-'), 40));
  const subject = oneLine(text(ev?.subject) ?? '-');
  const seq = sequenceOf(ev);
  const after: string[] = [];
  if (seq !== undefined) after.push(`seq ${seq}`);
  if (p.mark) after.push(oneLine(p.mark));
  after.push(...watchdogParts(ev).map(oneLine));
  const trailer = (p.trailer ?? []).filter(Boolean).map((t) => cutEnd(oneLine(t), 64));

  const fixed = [...head, ...after, ...trailer];
  // every part is followed by a separator but the last; the subject is one part more
  const fixedWidth = fixed.reduce((n, s) => n + width(s), 0) + SEP.length * fixed.length;
  const subjectWidth = width(subject);
  let room = MAX_LINE - fixedWidth - Math.min(subjectWidth, MIN_SUBJECT);
  const details: string[] = [];
  for (const raw of eventDetails(ev)) {
    const d = oneLine(raw);
    const w = width(d) + SEP.length;
    if (w <= room) {
      details.push(d);
      room -= w;
    } else if (CUTTABLE.test(d) && room - SEP.length >= MIN_CUT) {
      details.push(cutEnd(d, room - SEP.length));
      room = 0;
    }
  }
  const detailsWidth = details.reduce((n, s) => n + width(s) + SEP.length, 0);
  const subjectRoom = Math.max(1, MAX_LINE - fixedWidth - detailsWidth);
  const parts = [...head, cutMiddle(subject, subjectRoom), ...after, ...details, ...trailer];
  return cutEnd(parts.join(SEP), MAX_LINE);
}

/**
 * `--verbose`: the request's headers as received, one `    name: value` line each (at most
 * MAX_LINE), signatures cut to their first 8 characters.
 */
export function headerLines(rawHeaders: string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i];
    let value = rawHeaders[i + 1] ?? '';
    if (REDACTED_HEADERS.has(name.toLowerCase())) value = redact(value);
    out.push(cutEnd(oneLine(`    ${name}: ${value}`), MAX_LINE));
  }
  return out;
}

/** Each space-separated signature (webhook-signature lists several) cut to its first 8 characters. */
export function redact(value: string): string {
  return value
    .split(' ')
    .map((v) => (v.length > REDACT_KEEP ? `${v.slice(0, REDACT_KEEP)}…` : v))
    .join(' ');
}

/**
 * How long a sequence may be missing before listen says so: past the 5 s an attempt may take
 * (CONTRACT 6.6), with a margin. An unordered webhook's events of one key may arrive out of
 * sequence (attempts in parallel), so a skip is only a gap once this has passed.
 */
export const GAP_WAIT_MS = 6000;

/** Sequences of one key not seen yet, since a later one arrived. */
interface Gap {
  orgKey: string;
  key: string;
  /** the sequences not seen yet */
  unseen: Set<bigint>;
  /** when the later one arrived */
  since: number;
}

/**
 * The highest `sequence` seen per org and ordering key (`svcorderkey`, CONTRACT 10.1), and the
 * sequences skipped on the way: once one is still not seen GAP_WAIT_MS after a later one came, a
 * notice (two lines: what was not seen, and the `svc webhooks recover` that fills exactly that
 * gap). A recovery, a resend or an example fills or repeats; none starts a gap (nor does the first
 * event of a key the listener sees). A webhook whose interests, match or filter leave some of a
 * key's events out sees gaps by design: the notice says "not seen", not "lost".
 */
export class SequenceWatch {
  private readonly last = new Map<string, bigint>();
  private readonly gaps: Gap[] = [];
  /**
   * `webhookId`: the webhook that delivers here (--webhook), for the recovery line. Bounded: past
   * `maxKeys` keys the oldest seen is forgotten, past `maxGaps` gaps the oldest is said at once.
   */
  constructor(
    private readonly webhookId: string | null = null,
    private readonly maxKeys = 100_000,
    private readonly maxGaps = 10_000,
  ) {}

  /** A delivery's event arrived at `now`: its sequence noted, a gap it fills filled, one it opens opened. */
  see(ev: Json | undefined, replayed: boolean, now: number): void {
    const seq = sequenceOf(ev);
    const key = text(ev?.svcorderkey);
    if (seq === undefined || !key) return;
    const id = `${text(ev?.svcorgid) ?? ''}\u0000${key}`;
    for (const g of this.gaps) if (g.orgKey === id) g.unseen.delete(seq);
    if (replayed) return;
    const prev = this.last.get(id);
    if (prev !== undefined && seq <= prev) return;
    this.last.delete(id);
    this.last.set(id, seq);
    if (this.last.size > this.maxKeys) this.last.delete(this.last.keys().next().value as string);
    if (prev === undefined || seq === prev + 1n) return;
    const unseen = new Set<bigint>();
    for (let s = prev + 1n; s < seq; s++) unseen.add(s);
    this.gaps.push({ orgKey: id, key, unseen, since: now });
  }

  /** The notices of gaps still open GAP_WAIT_MS after they opened (each said once), in the order they opened. */
  due(now: number): string[] {
    const out: string[] = [];
    while (this.gaps.length && (now - this.gaps[0].since >= GAP_WAIT_MS || this.gaps.length > this.maxGaps)) {
      const g = this.gaps.shift()!;
      if (g.unseen.size) out.push(...this.notice(g));
    }
    // gaps filled meanwhile are dropped as they come to the front; the rest wait their turn
    return out;
  }

  private notice(g: Gap): string[] {
    const seqs = [...g.unseen].sort((x, y) => (x < y ? -1 : 1));
    const first = seqs[0];
    const last = seqs[seqs.length - 1];
    const n = seqs.length;
    const which =
      n === 1 ? `${first}` : last - first + 1n === BigInt(n) ? `${first}-${last}` : `${seqs.slice(0, 4).join(', ')}${n > 4 ? ', …' : ''}`;
    const k = cutMiddle(oneLine(g.key), 48);
    const webhook = this.webhookId ? cutMiddle(oneLine(this.webhookId), 40) : '<webhook id> (say it with --webhook)';
    // two lines: what was not seen, and the recovery that fills exactly that gap (CONTRACT 10.1)
    return [
      cutEnd(
        `not seen ${n} event${n === 1 ? '' : 's'} of ${k} (sequence ${which}) within ${GAP_WAIT_MS / 1000} s of a later one`,
        MAX_LINE,
      ),
      cutEnd(
        `  recover with: svc webhooks recover ${webhook} --order-key ${k} --after-sequence ${first - 1n} --until-sequence ${last}`,
        MAX_LINE,
      ),
    ];
  }
}
