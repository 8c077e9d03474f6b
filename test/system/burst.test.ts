// A burst to thousands of webhooks (issue 20): 10 events fan out to 2 000 webhooks of one org, all
// at one receiver — 20 000 attempts, 256 in flight over one pooled origin. Each delivery arrives
// once, none fails (the receiver answers at once: every attempt is well inside its 5 s) and svc's
// memory stays bounded.
//
// In the serial set (vitest.config.ts): the attempts' 5 s is the whole exchange, and the receiver
// runs in this test's process; beside other files and their child processes on 2 cores, a wave of
// 256 new connections once waited past 5 s for the CPU (the test measured the machine, not svc).
import { connect } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { describe, expect, it } from 'vitest';
import { findNatsServer, startNatsServer } from '../helpers/nats-server.ts';
import { childSettled, childWarnings, sigterm, spawnService } from '../helpers/child-service.ts';
import { newDbWithOrg, waitFor } from '../helpers/service.ts';
import { metric, rssBytes, startLedgerReceiver } from '../helpers/ledger.ts';
import { sendReliably, startedFact } from '../helpers/producer.ts';
import { insertWebhooks } from '../helpers/webhooks.ts';

const HAVE_NATS = findNatsServer() !== null;

/** How many attempts took longer than each of these (seconds), from svc_delivery_duration_seconds. */
async function attemptsOver(url: string, bounds: string[]): Promise<string> {
  const all = await metric(url, 'svc_delivery_duration_seconds_bucket', { le: '+Inf' });
  const over = await Promise.all(
    bounds.map(async (le) => `${all - (await metric(url, 'svc_delivery_duration_seconds_bucket', { le }))} over ${le} s`),
  );
  return over.join(', ');
}

describe.skipIf(!HAVE_NATS)('burst, NATS mode', () => {
  it('a burst to thousands of webhooks: every delivery arrives once, none fails, memory stays bounded', async (ctx) => {
    const HOOKS = 2000;
    const EVENTS = 10;
    const server = await startNatsServer();
    ctx.onTestFinished(() => server.stop());
    const rx = await startLedgerReceiver({ delayMs: 0 });
    ctx.onTestFinished(() => rx.close());
    const { db, org } = newDbWithOrg('burst');
    // the webhooks go straight into the database before svc starts (2000 API calls would be most of
    // this test's time); svc replicates them to its data plane at start like any other
    const t0 = Date.now();
    insertWebhooks(
      db,
      org.org_id,
      Array.from({ length: HOOKS }, (_, i) => `${rx.url}/h/${i}`),
    );
    const svc = await spawnService(db, ['--nats', server.url, '--no-local-runner', '--delivery-threads', '1']);
    ctx.onTestFinished(() => {
      if (svc.proc.exitCode === null && svc.proc.signalCode === null) svc.proc.kill('SIGKILL');
    });
    const createdMs = Date.now() - t0;
    const nc = await connect({ servers: server.url, name: 'burst-test' });
    ctx.onTestFinished(() => nc.close());
    const failuresBefore = await metric(svc.url, 'svc_deliveries_total', { outcome: 'failure' });
    const successBefore = await metric(svc.url, 'svc_deliveries_total', { outcome: 'success' });

    const pid = svc.proc.pid!;
    const base = rssBytes(pid)!;
    let peak = base;
    const sampler = setInterval(() => (peak = Math.max(peak, rssBytes(pid) ?? 0)), 50);
    ctx.onTestFinished(() => clearInterval(sampler));
    const facts = Array.from({ length: EVENTS }, () => startedFact(org.org_id));
    const t1 = Date.now();
    await Promise.all(facts.map((f) => sendReliably(nc, f.natsSubject, f.body)));
    await waitFor(() => rx.deliveries.length >= HOOKS * EVENTS, 90_000, `${HOOKS * EVENTS} deliveries (have ${rx.deliveries.length})`);
    const burstMs = Date.now() - t1;
    const counted = async () => {
      const [success, failure] = await Promise.all(
        ['success', 'failure'].map((outcome) => metric(svc.url, 'svc_deliveries_total', { outcome })),
      );
      return { success: success - successBefore, failure: failure - failuresBefore };
    };
    let last = { success: 0, failure: 0 };
    await waitFor(
      async () => (last = await counted()).success + last.failure >= HOOKS * EVENTS,
      60_000,
      () => `the outcomes counted (${last.success} successes, ${last.failure} failures); svc's warnings: ${childWarnings(svc.output())}`,
    );
    await childSettled(db, { jsm: await jetstreamManager(nc), timeoutMs: 30_000 });
    clearInterval(sampler);

    const growth = peak - base;
    console.log(
      `burst nats: ${EVENTS} events × ${HOOKS} webhooks = ${rx.deliveries.length} deliveries in ${burstMs} ms (${HOOKS} webhooks ` +
        `stored and svc started in ${createdMs} ms); ` +
        `attempts ${await attemptsOver(svc.url, ['0.5', '1', '2.5'])}; svc RSS ${(base / 2 ** 20).toFixed(0)} MB before, peak ` +
        `growth ${(growth / 2 ** 20).toFixed(1)} MB`,
    );
    expect(rx.deliveries).toHaveLength(HOOKS * EVENTS);
    const pairs = new Set(rx.deliveries.map((d) => `${d.path} ${d.subject}`));
    expect(pairs.size, 'each (webhook, event) once').toBe(HOOKS * EVENTS);
    const subjects = new Set(facts.map((f) => f.subject));
    expect(rx.deliveries.filter((d) => !subjects.has(d.subject))).toEqual([]);
    expect(
      await metric(svc.url, 'svc_deliveries_total', { outcome: 'failure' }),
      `failures; svc's warnings: ${childWarnings(svc.output())}`,
    ).toBe(failuresBefore);
    // 20 000 attempts are small records around 10 shared bodies, 256 in flight over one pooled
    // origin: tens of MB. A connection, or a buffered request, per attempt would be hundreds.
    expect(growth).toBeLessThan(150 * 2 ** 20);
    expect((await sigterm(svc)).code).toBe(0);
  }, 180_000);
});
