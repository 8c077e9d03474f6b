// Producer ingest (CONTRACT 5.2): svc.ingest.<org>.<family>.<id> → validated input → engine.
// The reply {ok: true} is sent only after the fact is committed (or recognised as a duplicate).
// Under load, messages that arrive while a commit is under way are committed together (group
// commit: one transaction, each fact in its own savepoint), and each producer is still answered
// only once its own fact is committed.
import type { Logger } from 'pino';
import type { z } from 'zod';
import type { Bus, BusMessage, Subscription } from '../bus/bus.ts';
import { ingestWildcard, parseIngestSubject } from '../bus/subjects.ts';
import { isProducerReplySubject } from '../bus/nats-auth.ts';
import type { Engine, IngestResult, ProducerFact } from '../engine/engine.ts';
import { InvalidError } from '../domain/errors.ts';
import type { Metrics } from '../metrics.ts';
import { healthMessageSchema, jobResultSchema, runnerMessageSchema, workflowMessageSchema } from '../domain/producer-messages.ts';

export interface IngestDeps {
  bus: Bus;
  logger: Logger;
  metrics: Metrics;
  engine: Engine;
}

/** Facts committed together at most. */
const MAX_GROUP = 512;

function parse<S extends z.ZodType>(schema: S, value: unknown): z.infer<S> {
  const r = schema.safeParse(value);
  if (!r.success) {
    const first = r.error.issues[0];
    throw new InvalidError(`invalid message: ${first.path.join('.') || '(message)'}: ${first.message}`);
  }
  return r.data;
}

/** Subject and payload checks that need no transaction; throws with the reason (invalid). */
export function parseIngest(subject: string, data: Uint8Array): ProducerFact {
  const where = parseIngestSubject(subject);
  if (!where) throw new InvalidError(`unknown ingest subject ${subject}`);
  let body: unknown;
  try {
    body = JSON.parse(Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString('utf8'));
  } catch {
    throw new InvalidError('message is not JSON');
  }
  const { orgId, id } = where;
  switch (where.family) {
    case 'jobs':
      return { family: 'jobs', orgId, id, body: parse(jobResultSchema, body) };
    case 'workflows':
      return { family: 'workflows', orgId, id, body: parse(workflowMessageSchema, body) };
    case 'runners':
      return { family: 'runners', orgId, id, body: parse(runnerMessageSchema, body) };
    case 'health':
      return { family: 'health', orgId, id, body: parse(healthMessageSchema, body) };
  }
}

type Reply = { ok: true } | { ok: false; error: string };

export function startIngest(deps: IngestDeps): Subscription {
  let queue: BusMessage[] = [];
  let scheduled = false;

  const answer = (msg: BusMessage, reply: Reply, result: IngestResult | 'invalid') => {
    deps.metrics.ingestMessages.inc({ result });
    if (!reply.ok) deps.logger.warn({ subject: msg.subject, error: reply.error }, 'ingest message dropped');
    respond(msg, reply);
  };

  const run = () => {
    scheduled = false;
    const msgs = queue.splice(0, MAX_GROUP);
    if (queue.length) schedule();
    const ready: Array<{ msg: BusMessage; fact: ProducerFact }> = [];
    for (const msg of msgs) {
      try {
        ready.push({ msg, fact: parseIngest(msg.subject, msg.data) });
      } catch (err) {
        answer(msg, { ok: false, error: errorText(err) }, 'invalid');
      }
    }
    if (!ready.length) return;
    let results;
    try {
      results = deps.engine.ingest(ready.map((r) => r.fact));
    } catch (err) {
      // the commit itself failed: nothing of the group is recorded; producers send again
      deps.logger.error({ err: errorText(err), facts: ready.length }, 'ingest commit failed');
      for (const r of ready) respond(r.msg, { ok: false, error: 'not recorded, try again' });
      return;
    }
    results.forEach((res, i) => {
      if (res.ok) answer(ready[i].msg, { ok: true }, res.value);
      else answer(ready[i].msg, { ok: false, error: errorText(res.error) }, 'invalid');
    });
  };

  const schedule = () => {
    if (scheduled) return;
    scheduled = true;
    setImmediate(run);
  };

  const sub = deps.bus.subscribe(
    ingestWildcard,
    (msg: BusMessage) => {
      queue.push(msg);
      schedule();
    },
    { queue: 'svc-ingest' },
  );
  return {
    unsubscribe: () => sub.unsubscribe(),
    // Shutdown (CONTRACT 1): later requests find no responder (the producer sends to another
    // process); every one already received is committed and answered, and the answers are sent.
    // Bounded: with the NATS connection down nothing can be confirmed (nor answered), and the
    // deliveries still have to drain within the shutdown's limit.
    async drain() {
      await within(sub.drain(), DRAIN_BOUND_MS);
      while (scheduled || queue.length > 0) await new Promise<void>((r) => setImmediate(r));
      await within(deps.bus.flush(), DRAIN_BOUND_MS);
    },
  };
}

/**
 * Answer a request, but only on an inbox of the subject's org: NATS does not check a publisher's
 * reply subject against its permissions, so a producer could otherwise have the engine publish on
 * svc.events.… or answer another org's request (src/bus/nats-auth.ts isProducerReplySubject).
 */
function respond(msg: BusMessage, reply: Reply): void {
  if (!msg.reply) return;
  const org = parseIngestSubject(msg.subject)?.orgId;
  if (org && isProducerReplySubject(msg.reply, org)) msg.respond(JSON.stringify(reply));
}

const DRAIN_BOUND_MS = 3000;

/** `p`, but no longer than `ms` (and never rejecting). */
async function within(p: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([p.catch(() => undefined), new Promise<void>((r) => (timer = setTimeout(r, ms)))]);
  clearTimeout(timer);
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
