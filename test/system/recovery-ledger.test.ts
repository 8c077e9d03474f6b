// A recovery is a delivery like any other (CONTRACT 4.5, 6.6): once POST …/recover answered 202,
// each of its attempts is made even if svc serve is killed with kill -9 in the middle. The ledger:
// every event of the recovery delivered (missing 0), and a repeat only of an attempt in flight
// at the kill (same CloudEvent id and webhook-id), at most 8 of them (one webhook).
import { randomUUID } from 'node:crypto';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { afterAll, describe, expect, it } from 'vitest';
import { PER_WEBHOOK_IN_FLIGHT } from '../../src/dataplane/pipeline.ts';
import { encodeRoute, type EventRoute } from '../../src/domain/event-route.ts';
import { openDb } from '../../store/db.ts';
import { insertEvent } from '../../store/history.ts';
import { childSettled, children, spawnService, type ChildService } from '../helpers/child-service.ts';
import { ledgerLine, ledgerOf, ledgerSeed, prng, startLedgerReceiver } from '../helpers/ledger.ts';
import { findNatsServer, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.ts';
import { apiClient, newDbWithOrg, waitFor } from '../helpers/service.ts';
import { insertWebhooks } from '../helpers/webhooks.ts';

const SEED = ledgerSeed();
console.log(`recovery ledger seed ${SEED} (LEDGER_SEED=${SEED} replays the kill moment)`);
const N = 1500;
const modes = findNatsServer() ? (['embedded', 'nats'] as const) : (['embedded'] as const);

afterAll(() => {
  for (const c of children) c.kill('SIGKILL');
});

/** N kept events of the org (as the engine keeps them: the CloudEvent, its route), emitted 10 min ago; their subjects. */
function seedHistory(db: string, orgId: string): string[] {
  const h = openDb(db);
  const subjects: string[] = [];
  const at = Date.now() - 10 * 60_000;
  try {
    h.transaction(() => {
      for (let i = 0; i < N; i++) {
        const id = randomUUID();
        const subject = `${orgId}/install/inst_${i}/started`;
        const type = 'com.svc.install.provision.started.v1';
        const body = JSON.stringify({
          specversion: '1.0',
          id,
          source: '//127.0.0.1/ctl-api',
          type,
          subject,
          time: new Date(at).toISOString(),
          svcorgid: orgId,
          data: { n: i },
        });
        const route: EventRoute = {
          org: orgId,
          type,
          resource: 'installs',
          op: 'provision',
          event: 'lifecycle.started',
          install: { id: `inst_${i}`, labels: {} },
          component: null,
          action: null,
          rev: 0,
        };
        insertEvent(h, { event_id: id, org_id: orgId, type, subject, body, route: encodeRoute(route), created_ms: at });
        subjects.push(subject);
      }
    })();
  } finally {
    h.close();
  }
  return subjects;
}

describe.each(modes)('recovery ledger (%s mode)', (mode) => {
  it('kill -9 of svc serve in the middle of a large recovery: every event of it delivered after the restart, repeats only of ' +
    'attempts in flight', async () => {
    const random = prng((SEED ^ (mode === 'nats' ? 0x9e3779b9 : 0)) >>> 0);
    let nats: NatsServerHandle | null = null;
    const rx = await startLedgerReceiver({ delayMs: 20 }); // 8 in flight → ~400 deliveries/s
    let svc: ChildService | null = null;
    try {
      if (mode === 'nats') nats = await startNatsServer();
      const args = ['--no-local-runner', ...(nats ? ['--nats', nats.url, '--delivery-threads', '1'] : [])];
      const { db, org } = newDbWithOrg('recovery-ledger');
      const subjects = seedHistory(db, org.org_id);
      insertWebhooks(db, org.org_id, [`${rx.url}/h/rec`]);
      svc = await spawnService(db, args);
      const api = apiClient(svc.url, org);
      const hook = (await api.get('/v1/orgs/current/webhooks')).body[0].webhook_id;
      const r = await api.post(`/v1/orgs/current/webhooks/${hook}/recover`, { since: '1h', backfill: true });
      expect(r.status, r.text).toBe(202);
      expect(r.body.events).toBe(N);

      const moment = Math.round((0.1 + random() * 0.6) * 1000) / 1000;
      await waitFor(() => rx.distinct('/h/rec') >= Math.ceil(moment * N), 60_000, `${Math.ceil(moment * N)} deliveries before the kill`);
      svc.proc.kill('SIGKILL');
      expect((await svc.exited).signal).toBe('SIGKILL');
      const atKill = rx.distinct('/h/rec');
      svc = await spawnService(db, args);

      await waitFor(() => rx.distinct('/h/rec') >= N, 90_000, `all ${N} events of the recovery delivered (have ${rx.distinct('/h/rec')})`);
      const nc = nats ? await connect({ servers: nats.url }) : null;
      try {
        await childSettled(db, { jsm: nc ? await jetstreamManager(nc) : undefined, timeoutMs: 30_000 });
      } finally {
        await nc?.close();
      }
      const l = ledgerOf(subjects, rx.deliveries, '/h/rec');
      console.log(ledgerLine(`recovery ${mode}`, l, `kill at ${moment} (${atKill} delivered)`));
      expect(l.missing).toEqual([]);
      expect(l.unexpected).toEqual([]);
      expect(l.foreignRepeats).toEqual([]);
      expect(l.repeats).toBeLessThanOrEqual(PER_WEBHOOK_IN_FLIGHT);
    } finally {
      svc?.proc.kill('SIGKILL');
      await rx.close();
      await nats?.stop();
    }
  }, 180_000);
});
