// Micro-benchmark of the engine's outcome path on this thread alone: outcome batches as a data plane
// sends them (1 000 outcomes over 100 webhooks of one org) applied by the status book
// (src/outcomes/status-book.ts: delivery status, metrics, the attempt log written per
// ATTEMPTS_PER_WRITE) on a real SQLite file opened as src/server.ts opens it. Prints CPU µs per
// outcome (process.cpuUsage: user + system), the batches made before the clock starts.
//
//   npx tsx bench/status-book.ts [batches, default 60]
//   SVC_BENCH_ROOT=/path/to/other/checkout npx tsx bench/status-book.ts   (that checkout's modules: before/after)
// With PAUSE=1 it waits for a byte on stdin after the warm-up (print `ready` on stderr) before it
// starts, so that a counter can be zeroed meanwhile (callgrind_control --zero, as
// bench/ingest-instructions.ts does for ingest).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import type { OutcomeBatch } from '../src/outcomes/outcome.ts';

const ROOT = path.resolve(process.env.SVC_BENCH_ROOT ?? path.join(import.meta.dirname, '..'));
const { openDb } = (await import(`${ROOT}/store/db.ts`)) as typeof import('../store/db.ts');
const { createOrg } = (await import(`${ROOT}/store/orgs.ts`)) as typeof import('../store/orgs.ts');
const { DeliveryStatusBook } = (await import(`${ROOT}/src/outcomes/status-book.ts`)) as typeof import('../src/outcomes/status-book.ts');
const { createMetrics } = (await import(`${ROOT}/src/metrics.ts`)) as typeof import('../src/metrics.ts');
const { systemClock } = (await import(`${ROOT}/src/domain/clock.ts`)) as typeof import('../src/domain/clock.ts');

const BATCHES = Number(process.argv[2] ?? 60);
const PER_BATCH = 1000;
const WEBHOOKS = 100;

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-status-book-bench-'));
const db = openDb(path.join(dir, 'svc.db'));
// the checkpoints are another thread's in svc (store/checkpoints.ts): not this one's here
db.pragma('wal_autocheckpoint = 0');
const org = createOrg(db, 'bench').org.org_id;
const book = new DeliveryStatusBook(db, createMetrics({ defaultMetrics: false }), systemClock, pino({ level: 'silent' }), {
  engineClock: systemClock,
});

let seq = 0;
/** A batch of successful attempts, each of an event's attempts at its webhooks in turn (event ids begin with their time, as svc's do). */
function batch(n: number): OutcomeBatch {
  const at = Date.now();
  const outcomes = Array.from({ length: PER_BATCH }, () => {
    const s = seq++;
    const event = Math.floor(s / WEBHOOKS);
    return {
      webhook_id: `wh_${String(s % WEBHOOKS).padStart(20, '0')}`,
      org_id: org,
      event_id: `${(at + event)
        .toString(16)
        .padStart(12, '0')
        .replace(/^(.{8})/, '$1-')}-7000-8000-${event.toString(16).padStart(12, '0')}`,
      type: 'com.svc.workflow.lifecycle.v1',
      ok: true,
      status: 204,
      error: null,
      duration_ms: 2 + (s % 7),
      at: at + (s % 50),
    };
  });
  return { id: `bench.${n}`, sent_at: at, worker: 'bench', in_flight: 0, dropped: {}, outcomes };
}

for (let i = 0; i < 10; i++) book.apply(batch(i));
const batches = Array.from({ length: BATCHES }, (_, i) => batch(100 + i));
if (process.env.PAUSE) {
  process.stderr.write('ready\n');
  fs.readSync(0, Buffer.alloc(1));
}
const c0 = process.cpuUsage();
for (const b of batches) book.apply(b);
book.flush();
const c = process.cpuUsage(c0);
const n = BATCHES * PER_BATCH;
console.log(
  `${n} outcomes in batches of ${PER_BATCH} over ${WEBHOOKS} webhooks: ${((c.user + c.system) / n).toFixed(2)} µs CPU per ` +
    `outcome (sys ${(c.system / n).toFixed(2)}); svc from ${ROOT}`,
);
book.close();
db.close();
fs.rmSync(dir, { recursive: true, force: true });
process.exit(0);
