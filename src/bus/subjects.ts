/**
 * NATS subjects used by svc. This module is the only place where subject strings are built or
 * parsed (CONTRACT 5.2); the in-process bus uses exactly the same subjects.
 *
 *   svc.jobs.<org>.<runner>              engine → runner (core NATS)
 *   svc.ingest.<org>.<family>.<id>       producers → engine (core NATS request/reply, never in a stream)
 *   svc.events.<ce subject with / → .>   engine → subscribers (core NATS, one message per event)
 *   svc.hop.events                       engine → data planes (the SVC_EVENTS stream: batches of events)
 *   svc.outcomes.<worker>                data planes → engine (the SVC_OUTCOMES stream: outcome batches)
 *   svc.facts.<org>.<family>.<id>        ingest gates → engine (the SVC_FACTS stream: producers' facts, CONTRACT 9)
 */

import { ID_RE } from '../domain/ids.ts';

export const SUBJECT_PREFIX = 'svc';
export const jobsWildcard = 'svc.jobs.>';
export const ingestWildcard = 'svc.ingest.>';
/** The queue group of every process answering on ingestWildcard (CONTRACT 9: one request, one answer). */
export const INGEST_QUEUE_GROUP = 'svc-ingest';
export const eventsWildcard = 'svc.events.>';
/** What every subject eventsWildcard matches begins with. */
export const eventsPrefix = 'svc.events.';
/** The durable hop (src/bus/hop.ts): where the relay publishes batches of events into SVC_EVENTS. */
export const hopSubject = 'svc.hop.events';
export const hopWildcard = 'svc.hop.>';
/** Where svc worker data planes send their outcome batches (the SVC_OUTCOMES stream, src/bus/nats/jetstream.ts). */
export const outcomesWildcard = 'svc.outcomes.>';

/** Where ingest gates store producers' facts (the SVC_FACTS stream, CONTRACT 9 "Durable ingest"). */
export const factsWildcard = 'svc.facts.>';

/** `svc.facts.<org>.<family>.<id>`: a fact received on `svc.ingest.<org>.<family>.<id>`, as the stream keeps it. */
export function factSubject(ingestSubject: string): string {
  return `svc.facts.${ingestSubject.slice('svc.ingest.'.length)}`;
}

/** `svc.ingest.<org>.<family>.<id>` of a fact the stream keeps on `svc.facts.<org>.<family>.<id>`. */
export function ingestSubjectOfFact(factSubject: string): string {
  return `svc.ingest.${factSubject.slice('svc.facts.'.length)}`;
}

/** The org a fact's subject names (`svc.facts.<org>.…`), or '' when it names none. */
export function factOrg(factSubject: string): string {
  const start = 'svc.facts.'.length;
  const end = factSubject.indexOf('.', start);
  return end < 0 ? '' : factSubject.slice(start, end);
}

/** `svc.outcomes.<worker id>`: one worker's outcome batches. */
export function outcomesSubject(workerId: string): string {
  return `svc.outcomes.${workerId}`;
}

/**
 * Inbox prefixes: the engine's and workers' replies stay out of producers' reach, and each org's
 * producers get their replies under their own `_INBOX_<org>` (CONTRACT 5.2), which no other org
 * may subscribe to. A request on the in-process bus is the engine's own.
 */
export const INBOX_PREFIX: { engine: string; worker: string } = {
  engine: '_SVC_ENGINE_INBOX',
  worker: '_SVC_WORKER_INBOX',
} as const;

/**
 * The reply inbox prefix of an org's producers (CONTRACT 5.2): requests on `svc.ingest.<org>.…`
 * are answered only under it, and `svc nats creds` lets a producer subscribe to its own only.
 */
export function producerInboxPrefix(orgId: string): string {
  return `_INBOX_${orgId}`;
}

/**
 * Whether the engine may answer a request on an ingest subject of `org` on this reply subject.
 * NATS does not check a publisher's reply subject against its permissions: a producer could name
 * `svc.events.…`, another org's job subject or another org's inbox (NUIDs are predictable) as its
 * reply and have the engine publish there. Producers of `org` request with the inbox prefix
 * `_INBOX_<org>` (CONTRACT 5.2), the engine's own local runner on the engine's inbox; answer
 * nothing else.
 */
export function isProducerReplySubject(reply: string | undefined | null, org: string): boolean {
  return (
    typeof reply === 'string' &&
    (reply.startsWith(`${producerInboxPrefix(org)}.`) || reply.startsWith(`${INBOX_PREFIX.engine}.`)) &&
    isValidSubject(reply)
  );
}

export const ingestFamilies = ['jobs', 'workflows', 'runners', 'health'] as const;
export type IngestFamily = (typeof ingestFamilies)[number];

export interface IngestSubject {
  orgId: string;
  family: IngestFamily;
  id: string;
}

/** An id usable as one subject token: an svc id (CONTRACT 2: lowercase [a-z0-9_], 1..64 characters). */
export function isSafeToken(token: string): boolean {
  return typeof token === 'string' && ID_RE.test(token);
}

function token(value: string, what: string): string {
  if (!isSafeToken(value)) throw new Error(`invalid ${what} for a subject token: ${JSON.stringify(value)}`);
  return value;
}

/**
 * `svc.events.` + the CloudEvents subject with `/` replaced by `.`
 * (`org_1/workflow_step/wf_1/st_2/succeeded` → `svc.events.org_1.workflow_step.wf_1.st_2.succeeded`).
 * Throws when a segment is empty or not a safe token.
 */
export function eventSubject(ceSubject: string): string {
  // one test of the whole subject on the hot path (an event per fact); the segments only to say which is wrong
  if (typeof ceSubject === 'string' && CE_SUBJECT_RE.test(ceSubject)) return `${eventsPrefix}${ceSubject.replaceAll('/', '.')}`;
  const parts = String(ceSubject).split('/');
  for (const p of parts) token(p, 'CloudEvents subject segment');
  return `${eventsPrefix}${parts.join('.')}`;
}

/** A CloudEvents subject of safe tokens (ID_RE) separated by `/`. */
const CE_SUBJECT_RE = /^[a-z0-9_]{1,64}(?:\/[a-z0-9_]{1,64})*$/;

/** `svc.jobs.<org>.<runner>`: where the engine sends jobs for one runner. */
export function jobSubject(orgId: string, runnerId: string): string {
  return `svc.jobs.${token(orgId, 'org id')}.${token(runnerId, 'runner id')}`;
}

/** Inverse of {@link jobSubject}; null for anything else. */
export function parseJobSubject(subject: string): { orgId: string; runnerId: string } | null {
  const t = typeof subject === 'string' ? subject.split('.') : [];
  if (t.length !== 4 || t[0] !== 'svc' || t[1] !== 'jobs') return null;
  if (!isSafeToken(t[2]) || !isSafeToken(t[3])) return null;
  return { orgId: t[2], runnerId: t[3] };
}

/** `svc.ingest.<org>.<family>.<id>` */
export function ingestSubject(orgId: string, family: IngestFamily, id: string): string {
  if (!(ingestFamilies as readonly string[]).includes(family)) throw new Error(`invalid ingest family: ${JSON.stringify(family)}`);
  return `svc.ingest.${token(orgId, 'org id')}.${family}.${token(id, 'id')}`;
}

/** `svc.ingest.<org>.jobs.<job_id>`: where a runner reports a job's status. */
export function jobResultSubject(orgId: string, jobId: string): string {
  return ingestSubject(orgId, 'jobs', jobId);
}

/** Parses `svc.ingest.<org>.<family>.<id>` (exactly 5 tokens, safe tokens, known family); null otherwise. */
export function parseIngestSubject(subject: string): IngestSubject | null {
  if (typeof subject !== 'string') return null;
  const t = subject.split('.');
  if (t.length !== 5 || t[0] !== 'svc' || t[1] !== 'ingest') return null;
  const [, , orgId, family, id] = t;
  if (!isSafeToken(orgId) || !isSafeToken(id)) return null;
  if (!(ingestFamilies as readonly string[]).includes(family)) return null;
  return { orgId, family: family as IngestFamily, id };
}

/**
 * A syntactically valid NATS subject: non-empty tokens separated by '.', no whitespace; with
 * `wildcards`, `*` may be a whole token and `>` the whole last token.
 */
export function isValidSubject(subject: string, opts: { wildcards?: boolean } = {}): boolean {
  if (typeof subject !== 'string' || subject.length === 0) return false;
  // without wildcards every token is 1+ characters that are neither whitespace nor `.`, `*`, `>`
  if (!opts.wildcards) return PLAIN_SUBJECT_RE.test(subject);
  const t = subject.split('.');
  for (let i = 0; i < t.length; i++) {
    const tok = t[i];
    if (tok.length === 0 || /\s/.test(tok)) return false;
    if (tok === '*' || tok === '>') {
      if (!opts.wildcards) return false;
      if (tok === '>' && i !== t.length - 1) return false;
      continue;
    }
    if (tok.includes('*') || tok.includes('>')) return false;
  }
  return true;
}

const PLAIN_SUBJECT_RE = /^[^\s.*>]+(?:\.[^\s.*>]+)*$/;

/** NATS matching: `*` matches one token, a trailing `>` one or more tokens. */
export function subjectMatches(pattern: string, subject: string): boolean {
  const p = pattern.split('.');
  const s = subject.split('.');
  for (let i = 0; i < p.length; i++) {
    const pt = p[i];
    if (pt === '>') return i === p.length - 1 && s.length > i;
    if (i >= s.length) return false;
    if (pt !== '*' && pt !== s[i]) return false;
  }
  return p.length === s.length;
}

/** Whether two subject patterns (each possibly with wildcards) can match a common subject. */
export function subjectsOverlap(a: string, b: string): boolean {
  const x = a.split('.');
  const y = b.split('.');
  for (let i = 0; ; i++) {
    const xe = i >= x.length;
    const ye = i >= y.length;
    if (xe || ye) return xe && ye;
    if (x[i] === '>' || y[i] === '>') return true;
    if (x[i] !== '*' && y[i] !== '*' && x[i] !== y[i]) return false;
  }
}

/** Where svc processes tell each other that webhooks or labels changed (core NATS, no stream). */
export const controlSubject = 'svc.control.changes';
