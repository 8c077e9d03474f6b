// Fact -> CloudEvents 1.0 envelope (spec 6.3-6.5, CONTRACT 6.2).
import { randomFillSync } from 'node:crypto';
import type { Fact, RunResult, StepRef, WorkflowRef } from '../domain/facts.ts';
import { classify, type Classification } from './classify.ts';
import { slugsFor } from './slugs.ts';
import { approvalUrl, linksFor } from './links.ts';
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
  svcorgid: string;
  svckind: string;
  svctransition: string;
  interests: string[];
  data: Record<string, unknown>;
}

export interface EnvelopeOptions {
  /** '//<authority>/ctl-api', see sourceFor() */
  source: string;
  dashboardUrl: string;
  /** CloudEvents id; a fresh UUID when omitted */
  id?: string;
}

/** Approval plans whose JSON is larger than this are left out of the event (plan_truncated). */
export const MAX_PLAN_BYTES = 64 * 1024;

const TYPES: Readonly<Record<Fact['kind'], string>> = {
  workflow: 'com.svc.workflow.lifecycle.v1',
  workflow_step: 'com.svc.workflow_step.lifecycle.v1',
  workflow_step_approval: 'com.svc.workflow_step.approval.v1',
  drift_detected: 'com.svc.drift.detected.v1',
  component_health: 'com.svc.component.health.v1',
  install_health: 'com.svc.install.health.v1',
  runner_unhealthy: 'com.svc.runner.unhealthy.v1',
  runner_inactive: 'com.svc.runner.inactive.v1',
  webhook_ping: 'com.svc.webhook.ping.v1',
  webhook_delivery: 'com.svc.webhook.delivery.v1',
};

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

export function ceType(fact: Fact): string {
  return TYPES[fact.kind];
}

export function ceSubject(fact: Fact): string {
  const o = fact.org_id;
  switch (fact.kind) {
    case 'workflow':
      return `${o}/workflow/${fact.workflow.id}/${fact.transition}`;
    case 'workflow_step':
      return `${o}/workflow_step/${fact.workflow.id}/${fact.step.id}/${fact.transition}`;
    case 'workflow_step_approval':
      return `${o}/workflow_step_approval/${fact.workflow.id}/${fact.step.id}/${fact.transition}`;
    case 'drift_detected':
      return `${o}/drift_detected/${fact.workflow.id}/${fact.step.id}/detected`;
    case 'component_health':
      return `${o}/component_health/${fact.install_id}/${fact.component_id}/${fact.transition}`;
    case 'install_health':
      return `${o}/install_health/${fact.install_id}/${fact.transition}`;
    case 'runner_unhealthy':
      return `${o}/runner_unhealthy/${fact.runner.id}/unhealthy`;
    case 'runner_inactive':
      return `${o}/runner_inactive/${fact.runner.id}/inactive`;
    case 'webhook_ping':
      return `${o}/webhook_ping/${fact.webhook_id}/ping`;
    case 'webhook_delivery':
      return `${o}/webhook_delivery/${fact.webhook.id}/${fact.transition}`;
  }
}

function workflowData(w: WorkflowRef): Record<string, unknown> {
  return { id: w.id, type: w.type, owner_id: w.owner_id, owner_type: w.owner_type };
}

/** Every step field of spec 6.5, in this order; a field the step does not have is null. */
const STEP_FIELDS = ['id', 'name', 'idx', 'target_type', 'target_id', 'component_id', 'sandbox_id', 'execution_type'] as const satisfies ReadonlyArray<keyof StepRef>;

function stepData(s: StepRef): Record<string, unknown> {
  return Object.fromEntries(STEP_FIELDS.map((k) => [k, s[k] ?? null]));
}

function outcomeData(transition: 'succeeded' | 'failed' | 'cancelled', o: RunResult | undefined): Record<string, unknown> {
  const d = Number(o?.duration_ms);
  const out: Record<string, unknown> = {
    status: transition,
    duration_ms: Number.isFinite(d) && d > 0 ? Math.round(d) : 0,
  };
  if (transition === 'failed') out.error = o?.error && o.error.length > 0 ? o.error : 'failed';
  return out;
}

function jsonBytes(v: unknown): number {
  try {
    const s = JSON.stringify(v);
    return s === undefined ? 0 : Buffer.byteLength(s, 'utf8');
  } catch {
    return Number.POSITIVE_INFINITY;
  }
}

function approvalData(a: { status: string; plan?: unknown; note?: string; responded_at?: string; responded_by?: { token_id: string | null; token_name: string | null } }): Record<string, unknown> {
  const out: Record<string, unknown> = { status: a.status };
  if (a.plan !== undefined && a.plan !== null) {
    if (jsonBytes(a.plan) > MAX_PLAN_BYTES) out.plan_truncated = true;
    else out.plan = a.plan;
  }
  if (a.note !== undefined && a.note !== null) out.note = a.note;
  if (a.responded_at !== undefined && a.responded_at !== null) out.responded_at = a.responded_at;
  // who answered (CONTRACT 2): the token's id and name, never the token
  if (a.responded_by) out.responded_by = { token_id: a.responded_by.token_id, token_name: a.responded_by.token_name };
  return out;
}

/** data per CONTRACT 6.2 (kind, transition, org_id first; links last). */
export function ceData(fact: Fact, dashboardUrl: string): Record<string, unknown> {
  const d: Record<string, unknown> = { kind: fact.kind, transition: fact.transition, org_id: fact.org_id };
  switch (fact.kind) {
    case 'workflow':
    case 'workflow_step': {
      d.workflow = workflowData(fact.workflow);
      if (fact.workflow.parent) {
        const p = fact.workflow.parent;
        d.parent = { workflow_id: p.workflow_id, step_id: p.step_id, kind: p.kind };
      }
      if (fact.kind === 'workflow_step') d.step = stepData(fact.step);
      if (fact.action) d.action = { id: fact.action.id, name: fact.action.name };
      if (fact.transition !== 'started') d.outcome = outcomeData(fact.transition, fact.outcome);
      if (fact.rollout) {
        const r = fact.rollout;
        // the fields it has, in the contract's order (a gate's trip; a deploy's failed installs)
        d.rollout = Object.fromEntries(
          Object.entries({ run_id: r.run_id, trigger: r.trigger, install_id: r.install_id, component_id: r.component_id, verdict: r.verdict, reason: r.reason, failed_installs: r.failed_installs, install_ids: r.install_ids, next_window_at: r.next_window_at, window_ids: r.window_ids }).filter(([, v]) => v !== undefined),
        );
      }
      break;
    }
    case 'workflow_step_approval':
      d.workflow = workflowData(fact.workflow);
      d.step = stepData(fact.step);
      d.approval = approvalData(fact.approval);
      if (fact.transition === 'requested') (d.approval as Record<string, unknown>).url = approvalUrl(fact.org_id, fact.workflow.id, fact.step.id, dashboardUrl);
      break;
    case 'drift_detected':
      d.workflow = workflowData(fact.workflow);
      d.step = stepData(fact.step);
      d.install_id = fact.install_id;
      d.drift = {
        ...(fact.drift.component_id ? { component_id: fact.drift.component_id } : {}),
        ...(fact.drift.sandbox_id ? { sandbox_id: fact.drift.sandbox_id } : {}),
        changes: fact.drift.changes.map((ch) => ({ address: ch.address, action: ch.action })),
      };
      break;
    case 'component_health':
      d.install_id = fact.install_id;
      d.component_id = fact.component_id;
      d.health = {
        verdict: fact.health.verdict,
        previous: fact.health.previous ?? null,
        ...(fact.health.reason !== undefined ? { reason: fact.health.reason } : {}),
      };
      break;
    case 'install_health':
      d.install_id = fact.install_id;
      d.health = { verdict: fact.health.verdict, previous: fact.health.previous ?? null, component_id: fact.health.component_id };
      break;
    case 'runner_unhealthy':
    case 'runner_inactive':
      d.runner = { id: fact.runner.id, name: fact.runner.name, group_id: fact.runner.group_id, group_type: fact.runner.group_type };
      if (fact.reason !== undefined) d.reason = fact.reason;
      if (fact.install_id) d.install_id = fact.install_id;
      break;
    case 'webhook_ping':
      d.webhook_id = fact.webhook_id;
      break;
    case 'webhook_delivery': {
      const x = fact.delivery;
      d.webhook = { id: fact.webhook.id, url_host: fact.webhook.url_host };
      d.delivery = {
        consecutive_failures: x.consecutive_failures,
        failing_since: x.failing_since,
        last_error: x.last_error,
        last_status_code: x.last_status_code,
        ...(x.failed_events !== undefined ? { failed_events: x.failed_events } : {}),
        ...(x.recover_since !== undefined ? { recover_since: x.recover_since } : {}),
        ...(x.disabled_reason !== undefined ? { disabled_reason: x.disabled_reason } : {}),
      };
      break;
    }
  }
  d.links = linksFor(fact, dashboardUrl);
  return d;
}

/** The CloudEvent of a fact; null when the fact is not classified (never for ping). */
export function toCloudEvent(fact: Fact, opts: EnvelopeOptions): CloudEvent | null {
  return envelope(fact, classify(fact), opts);
}

function envelope(fact: Fact, cls: Classification | null, opts: EnvelopeOptions): CloudEvent | null {
  if (!cls && fact.kind !== 'webhook_ping') return null;
  return {
    specversion: '1.0',
    id: opts.id ?? eventId(),
    type: ceType(fact),
    source: opts.source,
    time: fact.time,
    subject: ceSubject(fact),
    datacontenttype: 'application/json',
    svcorgid: fact.org_id,
    svckind: fact.kind,
    svctransition: fact.transition,
    interests: slugsFor(fact, cls),
    data: ceData(fact, opts.dashboardUrl),
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
  return { id: ev.id, type: ev.type, subject: ev.subject, body: JSON.stringify(ev), route: routeOf(fact, ev.type, cls, opts.labels, opts.rev) };
}
