// Org B's ingest answers while org A's deliveries run at full speed (CONTRACT §8: another org's
// answers within 100 ms). A: 100 webhooks on the bench receiver, 1 500 facts in a closed loop of
// 20 outstanding (150 000 deliveries); B: no webhooks, one fact as a NATS request every 10 ms after
// its answer, for as long as A's phase lasts. Prints A's deliveries/s and B's answer times.
//   npx tsx bench/answers-beside.ts            (BENCH_SVC_ROOT=<checkout> for another build)
// Issue 33: the attempt log written once a second in one transaction held the engine's thread
// 135–230 ms at that rate, and B's slowest answers waited behind it (BENCHMARKS.md).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { connect } from '@nats-io/transport-node';
import { factFor, runPhase, startBenchReceiver } from './harness.ts';
import { createSvcOrg, createWebhooks, sleep, startNats, startSvcServe, stopChild } from './procs.ts';
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-beside-'));
const nats = await startNats();
const receiver = await startBenchReceiver();
const db = path.join(tmp, 'svc.db');
const a = createSvcOrg(db, 'a');
const b = createSvcOrg(db, 'b');
const serve = await startSvcServe({ natsUrl: nats.url, db, logFile: path.join(tmp, 'serve.log') });
const nc = await connect({ servers: nats.url, noAsyncTraces: true });
const ncB = await connect({ servers: nats.url, noAsyncTraces: true, inboxPrefix: `_INBOX_${b.org_id}` });
await createWebhooks(
  serve.url,
  a,
  Array.from({ length: 100 }, (_, i) => `${receiver.url}/a/${i}`),
  4,
);
let seq = 1;
await runPhase(nc, receiver, {
  name: 'warm',
  orgId: a.org_id,
  fanout: 100,
  events: 50,
  firstSeq: seq,
  window: 20,
  timeLimitMs: 30000,
  drainMs: 5000,
});
seq += 50;
const lat: number[] = [];
let stop = false;
const bLoop = (async () => {
  let s = 10_000_000;
  while (!stop) {
    const t = performance.now();
    await ncB.request(`svc.ingest.${b.org_id}.workflows.bwf_${s}`, new TextEncoder().encode(factFor(s)), { timeout: 5000 });
    lat.push(performance.now() - t);
    s++;
    await sleep(10);
  }
})();
const r = await runPhase(nc, receiver, {
  name: 'A x100',
  orgId: a.org_id,
  fanout: 100,
  events: 1500,
  firstSeq: seq,
  window: 20,
  timeLimitMs: 60000,
  drainMs: 10000,
});
stop = true;
await bLoop;
lat.sort((x, y) => x - y);
const q = (p: number) => lat[Math.min(lat.length - 1, Math.floor(p * lat.length))].toFixed(1);
console.log(
  `A ${r.deliveries} deliveries ${Math.round(r.deliveries_per_sec)}/s; B ${lat.length} answers p50 ${q(0.5)} p99 ${q(0.99)} ` +
    `max ${lat[lat.length - 1].toFixed(1)} ms; over 50 ms ${lat.filter((x) => x > 50).length}, over 100 ` +
    `ms ${lat.filter((x) => x > 100).length}`,
);
await nc.drain();
await ncB.drain();
await stopChild(serve.child);
await receiver.close();
await nats.stop();
fs.rmSync(tmp, { recursive: true, force: true });
process.exit(0);
