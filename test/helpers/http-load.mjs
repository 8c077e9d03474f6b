// An API client in a process of its own (forked with an IPC channel by test/helpers/load-process.ts),
// so that reading its answers does not share the event loop of the svc it loads, nor of the test
// that measures another client beside it. Plain JavaScript: node runs it without the test's
// TypeScript transform.
//
// SVC_LOAD (JSON): { url, path, headers, connections } keeps that many requests of GET url+path in
// flight, each on a connection of its own, one after another, until the parent sends 'stop'; then
// reports { done: { ok, limited, retryAfter: [min, max], limitedBody, other, items } } (items: the
// `data` length of the first 200; limitedBody: the first 429's body). 'progress' reports
// { progress: ok }.
import { Agent, request } from 'node:http';

const { url, path, headers, connections } = JSON.parse(process.env.SVC_LOAD);
const agent = new Agent({ keepAlive: true, maxSockets: connections });
const tally = { ok: 0, limited: 0, retryAfter: [Infinity, 0], limitedBody: null, other: [], items: null };
let stopping = false;

const get = () =>
  new Promise((resolve, reject) => {
    const req = request(url + path, { agent, headers }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, retryAfter: res.headers['retry-after'], body: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });

async function loop() {
  while (!stopping) {
    try {
      const r = await get();
      if (r.status === 200) {
        tally.ok++;
        if (tally.items === null) tally.items = JSON.parse(r.body.toString()).data.length;
      } else if (r.status === 429) {
        tally.limited++;
        const s = Number(r.retryAfter);
        tally.retryAfter = [Math.min(tally.retryAfter[0], s), Math.max(tally.retryAfter[1], s)];
        tally.limitedBody ??= JSON.parse(r.body.toString());
      } else if (tally.other.length < 5) tally.other.push(`${r.status} ${r.body.toString().slice(0, 200)}`);
    } catch (err) {
      if (tally.other.length < 5) tally.other.push(String(err));
    }
  }
}

const loops = Array.from({ length: connections }, loop);
process.on('message', async (m) => {
  if (m === 'progress') return process.send({ progress: tally.ok });
  if (m !== 'stop') return;
  stopping = true;
  await Promise.all(loops);
  agent.destroy();
  process.send({ done: tally });
  process.disconnect();
});
process.send({ started: true });
