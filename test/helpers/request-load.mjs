// A client making given requests one after another, in a process of its own (forked with an IPC
// channel by test/helpers/load-process.ts): reading large answers (a plan of 1,000 installs, its
// HTML page) does not share the event loop of the svc it loads, nor of the test measuring another
// client beside it. Plain JavaScript: node runs it without the test's TypeScript transform.
//
// SVC_LOAD (JSON): { lanes: [{ method, url, headers, body, times }] }. Each lane makes its request
// `times` times, one after another; the lanes run at once. When every lane is done it reports
// { done: [{ ms: [each request's time], statuses: { status: count } }] } per lane, in order.
import { performance } from 'node:perf_hooks';

const { lanes } = JSON.parse(process.env.SVC_LOAD);

async function lane({ method, url, headers, body, times }) {
  const ms = [];
  const statuses = {};
  for (let i = 0; i < times; i++) {
    const t0 = performance.now();
    const r = await fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), redirect: 'manual' });
    await r.arrayBuffer();
    ms.push(performance.now() - t0);
    statuses[r.status] = (statuses[r.status] ?? 0) + 1;
  }
  return { ms, statuses };
}

process.on('message', async (m) => {
  if (m !== 'go') return;
  const done = await Promise.all(lanes.map(lane));
  process.send({ done });
  process.disconnect();
});
process.send({ started: true });
