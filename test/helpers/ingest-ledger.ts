// The ingest ledger of CONTRACT 9 "Durable ingest" (issue 51): a producer sends a fact every 20 ms
// for 30 s while `svc serve` (NATS mode, a real SQLite file) is killed with kill -9 at 5 s and
// started again on the same --db at 15 s, a `svc worker` beside it throughout (its ingest gate
// answers while no engine runs). Each fact starts an external workflow of its own (CONTRACT 5.2),
// so that what was applied can be counted exactly through the API: the workflow exists, and its
// `workflow started` event is in GET /v1/events once and reached a real HTTP receiver once.
//
// The ledger: acknowledged = applied + missing, missing 0, duplicates 0; every fact answered
// `{"ok": true}`, p99 of the answers within 250 ms. An external workflow's second `started` emits
// nothing (CONTRACT 5), so a fact applied twice would not show in the events: the new engine's
// svc_ingest_messages_total{result="duplicate"} shows it (a cursor behind its effects makes it read
// applied facts again). And the events are in the order the stream holds the facts.
import type { ChildProcess } from 'node:child_process';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { expect, type TestContext } from 'vitest';
import { FACTS_STREAM } from '../../src/bus/nats/jetstream.ts';
import { childSettled, dataplaneKey, spawnService, spawnWorker, type ChildService, type SvcChild } from './child-service.ts';
import { rid } from './ids.ts';
import { ledgerOf, metric, startLedgerReceiver, type LedgerReceiver } from './ledger.ts';
import { ingestRequest } from './producer.ts';
import { apiClient, newDbWithOrg, waitFor, type ApiClient } from './service.ts';
import { pause } from './wait.ts';
import { createWebhook } from './webhooks.ts';

/** The scenario of the issue: one fact every 20 ms for 30 s, the engine killed at 5 s and started again at 15 s. */
export const SCENARIO = { everyMs: 20, forMs: 30_000, killAtMs: 5_000, restartAtMs: 15_000 };
/** How long a producer waits for an answer before it sends the same fact again (CONTRACT 5.2). */
const REQUEST_TIMEOUT_MS = 1000;
/** CONTRACT 9: answers within this, p99, while no engine runs. */
const P99_BOUND_MS = 250;

/** One fact as the producer saw it: when it went, when (and after how many tries) it was answered, and with what. */
export interface Sent {
  workflowId: string;
  /** CloudEvents subject of its `workflow started` event */
  subject: string;
  /** ms since the start of the run */
  sentAt: number;
  /** ms from the first send to the answer; null while unanswered */
  latencyMs: number | null;
  /** requests of this fact that got no answer (timed out, no responders), each sent again */
  unanswered: Array<{ at: number; error: string }>;
  /** the first answer that was not {ok: true} */
  refusal: string | null;
}

/** The figures of one run, as the report quotes them. */
export interface IngestLedger {
  name: string;
  sent: number;
  acknowledged: number;
  /** acknowledged facts whose workflow the engine has (GET /v1/workflows/{id} 200) */
  applied: number;
  /** acknowledged, not applied */
  missing: string[];
  /** events beyond the first of an acknowledged workflow's `started` (GET /v1/events) */
  duplicateEvents: string[];
  /** events of the org that no acknowledged fact explains */
  unexplainedEvents: string[];
  /** deliveries to the receiver: the ledger of test/helpers/ledger.ts, plus ids that differ from the API's */
  delivered: number;
  deliveryMissing: string[];
  deliveryRepeats: number;
  deliveryUnexpected: string[];
  deliveryIdMismatch: string[];
  refusals: string[];
  /** requests that got no answer: when they went, relative to the moment the engine's exit was seen (ms), and why */
  unanswered: Array<{ sinceKillMs: number; error: string }>;
  p50: number;
  p99: number;
  max: number;
  /** facts answered while no engine ran (between the kill and the new engine's `listening on`) */
  answeredWhileDown: number;
  /** the new engine's start, from its spawn to `listening on` (ms) */
  restartMs: number;
  /** svc_facts_pending of the new engine once everything is applied */
  factsPending: number;
  /** facts SVC_FACTS holds at the end (a fact resent after a request the killed gate had stored is there twice) */
  stored: number;
  /**
   * svc_ingest_messages_total{result} of the new engine: `duplicate` counts the facts it read that
   * had been applied already. Only a fact the stream holds twice (stored, then sent again by a
   * producer that got no answer) may be one: a fact the killed engine applied and the new one
   * applied again (its cursor behind its effects) would be counted here too, whereas an external
   * workflow's second `started` emits nothing and would not show in the events.
   */
  newEngine: { accepted: number; duplicate: number; ignored: number; invalid: number };
  /** the workflows' started events in the history (GET /v1/events, oldest first) in the order SVC_FACTS holds their facts */
  inStreamOrder: boolean;
}

export function ledgerSummary(l: IngestLedger): string {
  return (
    `ingest ledger ${l.name}: sent ${l.sent}, acknowledged ${l.acknowledged} = applied ${l.applied} + missing ${l.missing.length}; ` +
    `duplicate events ${l.duplicateEvents.length}; delivered ${l.delivered} (missing ${l.deliveryMissing.length}, repeats ` +
    `${l.deliveryRepeats}); refused ${l.refusals.length}; unanswered requests ${l.unanswered.length}` +
    `${l.unanswered.length ? ` (sent ${l.unanswered.map((u) => `${u.sinceKillMs} ms from the engine's death: ${u.error}`).join('; ')})` : ''}; ` +
    `answer latency p50 ${l.p50} ms, p99 ${l.p99} ms, max ${l.max} ms; ${l.answeredWhileDown} answered while no engine ran; ` +
    `engine restart ${l.restartMs} ms; SVC_FACTS holds ${l.stored}; svc_facts_pending ${l.factsPending} at the end; events in stream order: ${l.inStreamOrder}; the new engine's facts: ` +
    `${Object.entries(l.newEngine)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ')}`
  );
}

/**
 * The ledger held to CONTRACT 9. Every fact is answered ok (a producer sends again what got no
 * answer, CONTRACT 5.2) and applied once. A request can go unanswered only when it was in the hands
 * of the engine's gate at the kill -9 (received, not yet answered: the store and the wait for the
 * engine's verdict, VERDICT_WAIT_MS): no process can answer it then. So each unanswered request was
 * sent before the kill, and there are at most as many as the producer sends in the p99 bound.
 */
export function expectIngestLedger(l: IngestLedger): void {
  console.log(ledgerSummary(l));
  expect(l.sent).toBe(SCENARIO.forMs / SCENARIO.everyMs);
  expect(l.refusals, 'answered other than {ok: true}').toEqual([]);
  expect(l.acknowledged).toBe(l.sent);
  expect(l.missing, 'acknowledged, not applied').toEqual([]);
  expect(l.applied).toBe(l.acknowledged);
  expect(l.duplicateEvents, 'a workflow started twice').toEqual([]);
  expect(l.unexplainedEvents, 'an event no acknowledged fact explains').toEqual([]);
  expect(l.deliveryMissing, 'acknowledged, never delivered').toEqual([]);
  expect(l.deliveryUnexpected).toEqual([]);
  expect(l.deliveryIdMismatch, 'delivered with another id than the history holds').toEqual([]);
  expect(l.deliveryRepeats, 'no delivering process was killed: nothing is delivered twice').toBe(0);
  for (const u of l.unanswered) {
    expect(u.sinceKillMs, `an unanswered request (${u.error}) not in the killed gate's hands`).toBeLessThanOrEqual(0);
    expect(u.sinceKillMs).toBeGreaterThan(-REQUEST_TIMEOUT_MS);
  }
  expect(l.unanswered.length).toBeLessThanOrEqual(Math.ceil(P99_BOUND_MS / SCENARIO.everyMs));
  expect(l.p99).toBeLessThanOrEqual(P99_BOUND_MS);
  // the worker's gate answered throughout the outage (10 s at 50 facts/s)
  expect(l.answeredWhileDown).toBeGreaterThan((SCENARIO.restartAtMs - SCENARIO.killAtMs) / SCENARIO.everyMs / 2);
  expect(l.stored).toBeGreaterThanOrEqual(l.acknowledged);
  // applied exactly once across the kill: the new engine found no fact applied twice but those the stream holds twice
  expect(l.newEngine.duplicate, 'facts the new engine applied again (its cursor behind the effects)').toBe(l.stored - l.acknowledged);
  expect(l.newEngine.ignored).toBe(0);
  expect(l.newEngine.invalid).toBe(0);
  expect(l.newEngine.accepted).toBeGreaterThan(0);
  // CONTRACT 9: applied in the order the stream holds them (one org: no fairness reorders them)
  expect(l.inStreamOrder, 'the events in the order of the stream').toBe(true);
  expect(l.factsPending).toBe(0);
}

/** A fact starting an external workflow of its own (CONTRACT 5.2): one fact, one workflow, one event. */
function workflowFact(orgId: string) {
  const W = rid('wfx');
  return {
    workflowId: W,
    natsSubject: `svc.ingest.${orgId}.workflows.${W}`,
    body: JSON.stringify({
      kind: 'workflow',
      transition: 'started',
      workflow: { id: W, type: 'sync_secrets', owner_id: 'inst_ext', owner_type: 'installs' },
    }),
    subject: `${orgId}/workflow/${W}/started`,
  };
}

/** Every event of the org whose subject starts with `prefix`, oldest first (GET /v1/events, paged). */
export async function allEvents(api: ApiClient, prefix: string): Promise<Array<{ id: string; subject: string }>> {
  const out: Array<{ id: string; subject: string }> = [];
  let after: string | null = null;
  do {
    const q: string = `subject_prefix=${encodeURIComponent(prefix)}&limit=500${after ? `&after=${after}` : ''}`;
    const r: { status: number; text: string; body: any } = await api.get(`/v1/events?${q}`);
    if (r.status !== 200) throw new Error(`GET /v1/events: ${r.status} ${r.text}`);
    out.push(...r.body.data.map((e: { id: string; subject: string }) => ({ id: e.id, subject: e.subject })));
    after = r.body.next_cursor;
  } while (after);
  return out;
}

/** The processes of a test, killed when it ends however it ends. */
export function tracked(ctx: TestContext) {
  const procs = new Set<ChildProcess>();
  const cleanup: Array<() => Promise<unknown> | unknown> = [];
  ctx.onTestFinished(async () => {
    for (const p of procs) if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL');
    for (const f of cleanup.reverse()) await f();
  });
  return {
    track<T extends SvcChild>(c: T): T {
      procs.add(c.proc);
      return c;
    },
    onEnd(f: () => Promise<unknown> | unknown) {
      cleanup.push(f);
    },
  };
}

/** kill -9, and wait until it is gone. */
export async function kill9(c: SvcChild): Promise<void> {
  c.proc.kill('SIGKILL');
  const { signal } = await c.exited;
  if (signal !== 'SIGKILL') throw new Error(`expected the process to die of SIGKILL, it exited (${signal})`);
}

/**
 * Run the scenario against `natsUrl` (a URL or a cluster's seed list); `serveArgs` are svc serve's
 * extra arguments (e.g. --nats-replicas 3). Resolves the ledger once every acknowledged fact is
 * applied and its event delivered (or the deadlines ran out: then the ledger says what is missing).
 */
export async function runIngestLedger(ctx: TestContext, o: { name: string; natsUrl: string; serveArgs?: string[] }): Promise<IngestLedger> {
  const t = tracked(ctx);
  const rx: LedgerReceiver = await startLedgerReceiver();
  t.onEnd(() => rx.close());
  const { db, org } = newDbWithOrg('ingest-ledger');
  // --no-deliver: the worker delivers everything and is never killed, so a delivery seen twice can
  // only be an event emitted twice (attempts cut by a kill are test/system/ledger.test.ts's matter)
  const args = ['--nats', o.natsUrl, '--no-local-runner', '--no-deliver', ...(o.serveArgs ?? [])];
  let svc: ChildService = t.track(await spawnService(db, args));
  await createWebhook(apiClient(svc.url, org), `${rx.url}/h`);
  const worker = t.track(await spawnWorker(o.natsUrl, [], { SVC_DATAPLANE_KEY: dataplaneKey(db) }));
  const nc: NatsConnection = await connect({ servers: o.natsUrl.split(','), name: 'ingest-ledger-producer' });
  t.onEnd(() => nc.close());

  const facts: Sent[] = [];
  const t0 = Date.now();
  const since = () => Date.now() - t0;
  let killedAt = Number.POSITIVE_INFINITY;
  let backAt = Number.POSITIVE_INFINITY;

  /** One fact, sent again (the same body) until it is answered, as CONTRACT 5.2's producer does. */
  const send = async (f: ReturnType<typeof workflowFact>, s: Sent) => {
    for (let attempt = 0; attempt < 60; attempt++) {
      const at = since();
      try {
        const m = await ingestRequest(nc, f.natsSubject, f.body, { timeout: REQUEST_TIMEOUT_MS });
        s.latencyMs = since() - s.sentAt;
        const r = m.json<{ ok: boolean; error?: string }>();
        if (r.ok !== true) s.refusal = r.error ?? JSON.stringify(r);
        return;
      } catch (err) {
        s.unanswered.push({ at, error: String((err as Error).message ?? err) });
      }
      await pause(50, "no answer: the producer's back-off before it sends the same fact again");
    }
  };

  const answers: Array<Promise<void>> = [];
  const producing = (async () => {
    for (let i = 0; i * SCENARIO.everyMs < SCENARIO.forMs; i++) {
      const due = i * SCENARIO.everyMs;
      if (due > since()) await pause(due - since(), "the producer's pace: one fact every 20 ms on the wall clock");
      const f = workflowFact(org.org_id);
      const s: Sent = { workflowId: f.workflowId, subject: f.subject, sentAt: since(), latencyMs: null, unanswered: [], refusal: null };
      facts.push(s);
      answers.push(send(f, s));
    }
  })();

  await pause(SCENARIO.killAtMs - since(), 'the scenario kills the engine 5 s into the production');
  await kill9(svc);
  killedAt = since();
  await pause(SCENARIO.restartAtMs - since(), 'the scenario starts the engine again 15 s into the production');
  const spawnedAt = since();
  svc = t.track(await spawnService(db, args));
  backAt = since();
  await producing;
  await Promise.all(answers);

  const api = apiClient(svc.url, org);
  const acked = facts.filter((f) => f.latencyMs !== null && f.refusal === null);
  const ackedSubjects = new Set(acked.map((f) => f.subject));
  // applied: every acknowledged fact's event in the history, and delivered
  const prefix = `${org.org_id}/workflow/`;
  await waitFor(
    async () => new Set((await allEvents(api, prefix)).map((e) => e.subject)).size >= ackedSubjects.size,
    60_000,
    () => `every acknowledged fact applied (${ackedSubjects.size})`,
  ).catch(() => undefined); // the ledger below says what is missing
  await waitFor(() => rx.distinct('/h') >= ackedSubjects.size, 30_000, 'every event delivered').catch(() => undefined);
  // nothing queued anywhere: a late duplicate would have been emitted, and delivered, by now
  const jsm = await jetstreamManager(nc);
  await childSettled(db, { jsm, timeoutMs: 30_000 }).catch(() => undefined);
  const factsPending = await metric(svc.url, 'svc_facts_pending');
  const stored = (await jsm.streams.info(FACTS_STREAM)).state.messages;
  const results = async (result: string) => metric(svc.url, 'svc_ingest_messages_total', { result });
  const newEngine = {
    accepted: await results('accepted'),
    duplicate: await results('duplicate'),
    ignored: await results('ignored'),
    invalid: await results('invalid'),
  };

  const events = await allEvents(api, prefix);
  const streamOrder = await workflowsInStream(nc, stored);
  const historyOrder = events.map((e) => e.subject.split('/')[2]);
  const inStreamOrder = JSON.stringify(historyOrder) === JSON.stringify(streamOrder);
  if (!inStreamOrder) console.log(`${o.name}: history order ${historyOrder.slice(0, 20)}…, stream order ${streamOrder.slice(0, 20)}…`);
  const idsBySubject = new Map<string, string[]>();
  for (const e of events) idsBySubject.set(e.subject, [...(idsBySubject.get(e.subject) ?? []), e.id]);
  const duplicateEvents = [...idsBySubject].filter(([, ids]) => ids.length > 1).map(([s, ids]) => `${s}: ${ids.join(', ')}`);
  const unexplainedEvents = [...idsBySubject.keys()].filter((s) => !ackedSubjects.has(s));
  // applied: the engine has the workflow (its state, not only its event)
  const applied = await existing(
    api,
    acked.map((f) => f.workflowId),
  );
  const missing = acked.filter((f) => !applied.has(f.workflowId)).map((f) => f.workflowId);
  const deliveries = ledgerOf(ackedSubjects, rx.deliveries, '/h');
  const deliveryIdMismatch = rx.deliveries
    .filter((d) => d.path === '/h' && idsBySubject.has(d.subject) && !idsBySubject.get(d.subject)!.includes(d.id))
    .map((d) => `${d.subject}: delivered ${d.id}, the history has ${idsBySubject.get(d.subject)!.join(', ')}`);

  const latencies = acked.map((f) => f.latencyMs!).sort((a, b) => a - b);
  const pct = (p: number) => latencies[Math.min(latencies.length - 1, Math.ceil((p / 100) * latencies.length) - 1)] ?? 0;
  const ledger: IngestLedger = {
    name: o.name,
    sent: facts.length,
    acknowledged: acked.length,
    applied: applied.size,
    missing,
    duplicateEvents,
    unexplainedEvents,
    delivered: deliveries.delivered,
    deliveryMissing: deliveries.missing,
    deliveryRepeats: deliveries.repeats,
    deliveryUnexpected: deliveries.unexpected,
    deliveryIdMismatch,
    refusals: facts.filter((f) => f.refusal !== null).map((f) => `${f.workflowId}: ${f.refusal}`),
    unanswered: facts.flatMap((f) => f.unanswered.map((u) => ({ sinceKillMs: u.at - killedAt, error: u.error }))),
    p50: pct(50),
    p99: pct(99),
    max: latencies[latencies.length - 1] ?? 0,
    answeredWhileDown: facts.filter((f) => f.latencyMs !== null && f.sentAt + f.latencyMs > killedAt && f.sentAt + f.latencyMs < backAt)
      .length,
    restartMs: backAt - spawnedAt,
    factsPending,
    stored,
    newEngine,
    inStreamOrder,
  };
  if (ledger.missing.length || ledger.deliveryMissing.length || ledger.refusals.length) {
    console.log(`${o.name}: the engine's log after its restart (warnings):\n${warnings(svc.output())}`);
    console.log(`${o.name}: the worker's log (warnings):\n${warnings(worker.output())}`);
  }
  await sigterm(svc);
  await sigterm(worker);
  return ledger;
}

/** The workflow ids of the facts SVC_FACTS holds (`count` of them), in stream order, each once (its first fact). */
async function workflowsInStream(nc: NatsConnection, count: number): Promise<string[]> {
  const consumer = await jetstream(nc).consumers.get(FACTS_STREAM);
  const seen = new Set<string>();
  const order: string[] = [];
  for (let read = 0; read < count; ) {
    const batch = await consumer.fetch({ max_messages: Math.min(500, count - read), expires: 5000 });
    let n = 0;
    for await (const m of batch) {
      n++;
      const id = m.subject.split('.').pop()!; // svc.facts.<org>.workflows.<id>
      if (!seen.has(id)) order.push(id);
      seen.add(id);
    }
    if (n === 0) throw new Error(`SVC_FACTS gave ${read} of ${count} facts`);
    read += n;
  }
  return order;
}

/** Which of these workflow ids the engine has (GET /v1/workflows/{id}), a few requests at once. */
async function existing(api: ApiClient, ids: string[]): Promise<Set<string>> {
  const found = new Set<string>();
  let next = 0;
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (next < ids.length) {
        const id = ids[next++];
        const r = await api.get(`/v1/workflows/${id}`);
        if (r.status === 200 && r.body.workflow_id === id) found.add(id);
        else if (r.status !== 404) throw new Error(`GET /v1/workflows/${id}: ${r.status} ${r.text}`);
      }
    }),
  );
  return found;
}

function warnings(log: string): string {
  return (
    log
      .split('\n')
      .filter((l) => /"level":(4|5|6)\d/.test(l))
      .slice(-15)
      .join('\n') || 'none'
  );
}

async function sigterm(c: SvcChild): Promise<void> {
  c.proc.kill('SIGTERM');
  await c.exited;
}
