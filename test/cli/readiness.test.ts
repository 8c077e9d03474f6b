// Ready means ready (CONTRACT 1, issue 22): `listening on` and `worker ready` are promises. A
// producer that sends the moment it reads the line is answered, never "no responders"; GET /readyz
// says whether this process should get traffic (before ready, while NATS is down, from SIGTERM on).
// Real processes (bin/svc.mjs), a real nats-server, a real HTTP receiver.
import path from 'node:path';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDb } from '../../store/db.ts';
import { createOrg } from '../../store/orgs.ts';
import { insertWebhook } from '../../store/webhooks.ts';
import { newId } from '../../src/domain/ids.ts';
import { findNatsServer, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.ts';
import { children, dataplaneKey, spawnService, spawnWorker, type SvcChild } from '../helpers/child-service.ts';
import { startReceiver, type Receiver } from '../helpers/receiver.ts';
import { tmpDir } from '../helpers/service.ts';
import { waitFor } from '../helpers/wait.ts';
import { rid } from '../helpers/ids.ts';
import { ingestRequest } from '../helpers/producer.ts';

const HAVE_NATS = findNatsServer() !== null;
/** starts of svc serve on one database, and the burst each start gets at its line */
const STARTS = Number(process.env.READINESS_STARTS ?? 20);
const BURST = 50;

afterAll(() => {
  for (const c of children) c.kill('SIGKILL');
});

/** A fresh database with one org (svc creates its schema on open). */
function newDb(): { db: string; orgId: string } {
  const db = path.join(tmpDir('svc-ready-'), 'svc.db');
  const h = openDb(db);
  try {
    return { db, orgId: createOrg(h, 'ready').org.org_id };
  } finally {
    h.close();
  }
}

/** An external workflow's `started`: one valid fact (CONTRACT 5.2), a distinct workflow each time. */
function startedFact(orgId: string): { subject: string; body: string } {
  const W = rid('wfx');
  return {
    subject: `svc.ingest.${orgId}.workflows.${W}`,
    body: JSON.stringify({ kind: 'workflow', transition: 'started', workflow: { id: W, type: 'manual_deploy', owner_id: 'inst_ext', owner_type: 'installs' } }),
  };
}

/** Send `n` facts at once; resolves each answer (or the error's text). */
async function burst(nc: NatsConnection, orgId: string, n: number): Promise<string[]> {
  return Promise.all(
    Array.from({ length: n }, async () => {
      const f = startedFact(orgId);
      try {
        const m = await ingestRequest(nc, f.subject, f.body, { timeout: 5000 });
        return m.string();
      } catch (err) {
        return `error: ${(err as Error).message}`;
      }
    }),
  );
}

async function sigterm(c: SvcChild): Promise<number | null> {
  c.proc.kill('SIGTERM');
  return (await c.exited).code;
}

async function readyz(url: string): Promise<{ status: number; body: { ready: boolean; reasons?: string[] } }> {
  const r = await fetch(`${url}/readyz`);
  return { status: r.status, body: await r.json() };
}

describe.skipIf(!HAVE_NATS)('svc serve --nats: the line is a promise', () => {
  let nats: NatsServerHandle;
  let nc: NatsConnection;
  beforeAll(async () => {
    nats = await startNatsServer();
    nc = await connect({ servers: nats.url, name: 'readiness-test' });
  });
  afterAll(async () => {
    await nc?.close();
    await nats?.stop();
  });

  it(`${STARTS} starts on one database: a burst of ${BURST} facts sent at the line is answered {ok: true}, every one`, async () => {
    const { db, orgId } = newDb();
    const t0 = Date.now();
    const failed: string[] = [];
    for (let i = 0; i < STARTS; i++) {
      const svc = await spawnService(db, ['--nats', nats.url, '--no-local-runner']);
      const answers = await burst(nc, orgId, BURST);
      const bad = answers.filter((a) => a !== '{"ok":true}');
      if (bad.length) failed.push(`start ${i + 1}: ${bad.length} of ${BURST} not ok, e.g. ${bad[0]}`);
      expect(await sigterm(svc)).toBe(0);
    }
    console.log(`readiness: ${STARTS} starts, ${STARTS * BURST} facts sent at the line, ${failed.length} starts with failures, in ${Date.now() - t0} ms`);
    expect(failed).toEqual([]);
  }, 40_000 + STARTS * 6_000);
});
