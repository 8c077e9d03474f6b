// `svc worker` ends with a final line (issue 56, CONTRACT 1 "exits 0 on SIGTERM after draining"):
// on SIGINT (a Ctrl-C) or SIGTERM it finishes the deliveries in flight, then prints `drained` as its
// last line and exits 0. Real processes (bin/svc.mjs serve and worker), a real nats-server, a real
// HTTP receiver holding the delivery in flight when the signal comes.
import { connect } from '@nats-io/transport-node';
import { afterAll, describe, expect, it } from 'vitest';
import { findNatsServer, startNatsServer } from '../helpers/nats-server.ts';
import { children, dataplaneKey, sigterm, spawnService, spawnWorker, type SvcChild } from '../helpers/child-service.ts';
import { startReceiver } from '../helpers/receiver.ts';
import { newDbWithOrg } from '../helpers/service.ts';
import { insertWebhooks } from '../helpers/webhooks.ts';
import { ingestRequest } from '../helpers/producer.ts';
import { rid } from '../helpers/ids.ts';
import { waitFor } from '../helpers/wait.ts';

const HAVE_NATS = findNatsServer() !== null;

afterAll(() => {
  for (const c of children) c.kill('SIGKILL');
});

/** The worker's last output line, parsed (its log is JSON lines). */
function lastLine(w: SvcChild): { msg?: string; signal?: string } {
  const lines = w.output().trim().split('\n');
  return JSON.parse(lines[lines.length - 1]);
}

describe.skipIf(!HAVE_NATS)('svc worker: the final line', () => {
  it('SIGINT with a delivery in flight: the delivery is answered, then `drained` is the last line, exit 0; SIGTERM the same', async () => {
    const nats = await startNatsServer();
    const receiver = await startReceiver();
    const nc = await connect({ servers: nats.url, name: 'worker-drained-test' });
    try {
      const { db, org } = newDbWithOrg('drained');
      insertWebhooks(db, org.org_id, [receiver.hook('slow')]);
      receiver.set('slow', { status: 200, delayMs: 1500 });
      // the engine delivers nothing itself: only the worker can
      const svc = await spawnService(db, ['--nats', nats.url, '--no-local-runner', '--no-deliver']);
      const key = dataplaneKey(db);
      const worker = await spawnWorker(nats.url, [], { SVC_DATAPLANE_KEY: key });
      const W = rid('wfx');
      const body = JSON.stringify({
        kind: 'workflow',
        transition: 'started',
        workflow: { id: W, type: 'manual_deploy', owner_id: 'inst_ext', owner_type: 'installs' },
      });
      expect((await ingestRequest(nc, `svc.ingest.${org.org_id}.workflows.${W}`, body, { timeout: 5000 })).string()).toBe('{"ok":true}');
      await waitFor(() => receiver.at('slow').length > 0 || undefined, 10_000, 'the delivery reaching the receiver');

      // Ctrl-C while the receiver still holds the request
      const t0 = Date.now();
      worker.proc.kill('SIGINT');
      const { code } = await worker.exited;
      expect(code).toBe(0);
      expect(Date.now() - t0).toBeGreaterThan(500); // it waited for the delivery in flight
      expect(lastLine(worker)).toMatchObject({ msg: 'drained', signal: 'SIGINT' });
      expect(worker.output()).toMatch(/"msg":"draining"[\s\S]*"msg":"drained"/);

      const second = await spawnWorker(nats.url, [], { SVC_DATAPLANE_KEY: key });
      expect((await sigterm(second)).code).toBe(0);
      expect(lastLine(second)).toMatchObject({ msg: 'drained', signal: 'SIGTERM' });
      expect((await sigterm(svc)).code).toBe(0);
    } finally {
      await nc.close();
      await receiver.close();
      await nats.stop();
    }
  }, 60_000);
});
