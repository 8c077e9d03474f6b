// Producer ingest (CONTRACT 5.2): svc.ingest.<org>.<family>.<id> → validated input → engine.
// The reply {ok: true} is sent only after the fact is committed (or recognised as a duplicate).
import type { Logger } from 'pino';
import type { z } from 'zod';
import type { Bus, BusMessage, Subscription } from '../bus/bus.ts';
import { ingestWildcard, parseIngestSubject } from '../bus/subjects.ts';
import type { Metrics } from '../metrics.ts';
import type { Orchestrator } from '../orchestrator/runtime.ts';
import type { Producers } from '../engine/producers.ts';
import { healthMessageSchema, jobResultSchema, runnerMessageSchema, workflowMessageSchema } from './schemas.ts';

type Result = 'accepted' | 'duplicate' | 'ignored';

export interface IngestDeps {
  bus: Bus;
  logger: Logger;
  metrics: Metrics;
  orchestrator: Orchestrator;
  producers: Producers;
}

function parse<S extends z.ZodType>(schema: S, value: unknown): z.infer<S> {
  const r = schema.safeParse(value);
  if (!r.success) {
    const first = r.error.issues[0];
    throw new Error(`invalid message: ${first.path.join('.') || '(message)'}: ${first.message}`);
  }
  return r.data;
}

/** Handle one ingest message; returns the result or throws with a reason (invalid). */
export function handleIngest(deps: IngestDeps, subject: string, data: Uint8Array): Result {
  const where = parseIngestSubject(subject);
  if (!where) throw new Error(`unknown ingest subject ${subject}`);
  let body: unknown;
  try {
    body = JSON.parse(Buffer.from(data).toString('utf8'));
  } catch {
    throw new Error('message is not JSON');
  }
  switch (where.family) {
    case 'jobs':
      return deps.orchestrator.onJobResult(where.orgId, where.id, parse(jobResultSchema, body));
    case 'workflows':
      return deps.producers.externalWorkflow(where.orgId, where.id, parse(workflowMessageSchema, body));
    case 'runners':
      return deps.producers.runner(where.orgId, where.id, parse(runnerMessageSchema, body));
    case 'health':
      return deps.producers.health(where.orgId, where.id, parse(healthMessageSchema, body));
  }
}

export function startIngest(deps: IngestDeps): Subscription {
  return deps.bus.subscribe(
    ingestWildcard,
    (msg: BusMessage) => {
      let reply: { ok: true } | { ok: false; error: string };
      try {
        const result = handleIngest(deps, msg.subject, msg.data);
        deps.metrics.ingestMessages.inc({ result });
        reply = { ok: true };
      } catch (err) {
        const error = err instanceof Error ? err.message : String(err);
        deps.metrics.ingestMessages.inc({ result: 'invalid' });
        deps.logger.warn({ subject: msg.subject, error }, 'ingest message dropped');
        reply = { ok: false, error };
      }
      if (msg.reply) msg.respond(JSON.stringify(reply));
    },
    { queue: 'svc-ingest' },
  );
}
