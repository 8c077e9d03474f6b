// A producer in a process of its own (test/isolation/ingest-flood.test.ts, forked with an IPC channel),
// so that its client work does not share the engine's event loop and its timings are what the
// producer itself sees. Plain JavaScript: node runs it without the test's TypeScript transform.
//
// SVC_LOAD (JSON): { url, org, mode: 'flood', outstanding } keeps that many requests in flight
// until the parent sends 'stop', then reports { done: { sent, ok, refused, failed, errors, ms } };
// { url, org, mode: 'paced', count, intervalMs? } sends count facts one at a time (each
// intervalMs after the one before was sent, or as soon as it was answered if that is later;
// default: back to back) and reports { done: { latencies, answers, sentAt, ids } } (sentAt: the
// epoch ms of each request, to set beside the engine's timing logs; ids: each fact's workflow id); { url, org, mode: 'rate', perSecond,
// seconds } sends perSecond facts a second for that long, whatever the answers (10 ms apart in
// groups), and reports { done: { sent, ok, limited, retryAfterMs: [min, max], other, ms } }. Each
// fact is a new external workflow (accepted, one outbox row), answered on _INBOX_<org>.
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { connect } from '@nats-io/transport-node';

const workerData = JSON.parse(process.env.SVC_LOAD);
const { url, org, mode } = workerData;
const parentPort = { postMessage: (m) => process.send(m), on: (e, f) => process.on(e, f) };
const nc = await connect({ servers: [url], inboxPrefix: `_INBOX_${org}`, noAsyncTraces: true });
const tag = randomBytes(3).toString('hex');
let n = 0;
// real time is the point here: a producer's pace (a rate, an interval between requests)
const pace = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function send(id = `wfx_${tag}_${n++}`) {
  const body = JSON.stringify({
    kind: 'workflow',
    transition: 'started',
    workflow: { id, type: 'manual_deploy', owner_id: 'inst_x', owner_type: 'installs' },
  });
  // the connection's inbox prefix is the org's: its replies come to _INBOX_<org>.<nuid>.<n>
  return nc.request(`svc.ingest.${org}.workflows.${id}`, body, { timeout: 30_000 }).then((m) => m.json());
}

if (mode === 'flood') {
  const tally = { sent: 0, ok: 0, refused: 0, failed: 0, errors: [], ms: 0 };
  const t0 = performance.now();
  let stopping = false;
  const inflight = new Set();
  const one = () => {
    tally.sent++;
    const p = send().then(
      (r) => void (r.ok ? tally.ok++ : (tally.refused++, tally.errors.length < 5 && tally.errors.push(r.error))),
      (err) => void (tally.failed++, tally.errors.length < 5 && tally.errors.push(String(err))),
    );
    inflight.add(p);
    p.then(() => {
      inflight.delete(p);
      if (!stopping) one();
    });
  };
  parentPort.on('message', async (m) => {
    if (m === 'progress') return parentPort.postMessage({ progress: tally.ok });
    if (m !== 'stop') return;
    stopping = true;
    while (inflight.size) await Promise.all([...inflight]);
    tally.ms = Math.round(performance.now() - t0);
    await nc.close();
    parentPort.postMessage({ done: tally });
    process.disconnect();
  });
  for (let i = 0; i < workerData.outstanding; i++) one();
  parentPort.postMessage({ started: true });
} else if (mode === 'rate') {
  const tally = { sent: 0, ok: 0, limited: 0, retryAfterMs: [Infinity, 0], other: [], ms: 0 };
  const pending = [];
  const t0 = performance.now();
  const end = workerData.seconds * 1000;
  for (let elapsed = 0; elapsed < end; elapsed = performance.now() - t0) {
    // as many as are due by now: the rate holds whatever the timers' delays
    const due = Math.floor((elapsed / 1000) * workerData.perSecond) + 1;
    while (tally.sent < due) {
      tally.sent++;
      pending.push(
        send().then(
          (r) => {
            if (r.ok) tally.ok++;
            else if (r.error === 'rate_limited') {
              tally.limited++;
              tally.retryAfterMs = [Math.min(tally.retryAfterMs[0], r.retry_after_ms), Math.max(tally.retryAfterMs[1], r.retry_after_ms)];
            } else if (tally.other.length < 5) tally.other.push(r);
          },
          (err) => void (tally.other.length < 5 && tally.other.push(String(err))),
        ),
      );
    }
    await pace(10);
  }
  await Promise.all(pending);
  tally.ms = Math.round(performance.now() - t0);
  await nc.close();
  parentPort.postMessage({ done: tally });
  process.disconnect();
} else {
  const latencies = [];
  const answers = [];
  const sentAt = [];
  const ids = [];
  const interval = workerData.intervalMs ?? 0;
  for (let i = 0; i < workerData.count; i++) {
    const t0 = performance.now();
    sentAt.push(performance.timeOrigin + t0);
    ids.push(`wfx_${tag}_${n++}`);
    const r = await send(ids[i]);
    latencies.push(performance.now() - t0);
    answers.push(r);
    const rest = interval - (performance.now() - t0);
    if (rest > 0) await pace(rest);
  }
  await nc.close();
  parentPort.postMessage({ done: { latencies, answers, sentAt, ids } });
  process.disconnect();
}
