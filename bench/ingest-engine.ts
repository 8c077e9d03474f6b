// Micro-benchmark of the ingest hot path on this thread alone: the bench's fact (an external
// workflow `started`, bench/harness.ts factFor) parsed (src/ingest parseIngest) and committed by
// Engine.ingest in groups, on a real SQLite file opened as src/server.ts opens it, with the
// in-process bus, no relay and no delivery. Prints, per group size, CPU µs per fact
// (process.cpuUsage: user + system, the parse and the commit apart) and SQLite statements run per
// fact (a second, counted pass: counting costs CPU, so it is not timed).
//
//   npx tsx bench/ingest-engine.ts [facts per size, default 20000] [group sizes, default 1,8,64] [workflow|step] [history|outbox]
// `step`: instead, each fact is a new step's `started` (workflow_step) of one external workflow.
// `history` (the default): each event queued in its history row, as NATS mode with a history does
// (src/handoff/relay-queues.ts); `outbox`: in an outbox row beside it, as before issue 33's step 2
// (and as embedded mode does).
//   node --cpu-prof --cpu-prof-dir=/tmp/prof --import tsx bench/ingest-engine.ts 20000 64
// Instructions instead of CPU time (repeatable on a noisy machine): bench/ingest-instructions.ts.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import type Database from 'better-sqlite3';
import { openDb, type Db } from '../store/db.ts';
import { createOrg } from '../store/orgs.ts';
import { createMemoryBus } from '../src/bus/memory.ts';
import { systemClock } from '../src/domain/clock.ts';
import { Engine, type ProducerFact } from '../src/engine/engine.ts';
import { parseIngest } from '../src/ingest/ingest.ts';
import { createMetrics } from '../src/metrics.ts';
import { relayEventQueue } from '../src/handoff/relay-event-queue.ts';
import { factFor } from './harness.ts';

const N = Number(process.argv[2] ?? 20_000);
const SIZES = (process.argv[3] ?? '1,8,64').split(',').map(Number);
const FACT = process.argv[4] ?? 'workflow';
const QUEUE = process.argv[5] ?? 'history';
// embedded mode's queue, loaded for `outbox` only: the modules of its data plane, loaded and unused,
// add some 1-2 % to the instructions per fact that callgrind counts for `history`
const embedded = QUEUE === 'history' ? null : await import('../src/topology/embedded.ts');
const WARMUP = 2_000;

/**
 * Count the statements run (run/get/all/iterate) on any connection while `fn` runs, and the wall
 * time of each distinct SQL text. The wrapper is in place only then: it costs CPU itself.
 */
function countStatements(db: Db, fn: () => void): Map<string, { n: number; us: number }> {
  const proto = Object.getPrototypeOf(db.prepare('SELECT 1')) as Record<string, (...a: unknown[]) => unknown>;
  const saved = new Map<string, (...a: unknown[]) => unknown>();
  const bySql = new Map<string, { n: number; us: number }>();
  for (const m of ['run', 'get', 'all', 'iterate']) {
    const orig = proto[m];
    saved.set(m, orig);
    proto[m] = function (this: Database.Statement, ...args: unknown[]) {
      const t0 = process.hrtime.bigint();
      try {
        return orig.apply(this, args);
      } finally {
        const e = bySql.get(this.source) ?? { n: 0, us: 0 };
        e.n++;
        e.us += Number(process.hrtime.bigint() - t0) / 1000;
        bySql.set(this.source, e);
      }
    };
  }
  try {
    fn();
  } finally {
    for (const [m, orig] of saved) proto[m] = orig;
  }
  return bySql;
}

interface Setup {
  db: Db;
  engine: Engine;
  orgId: string;
  dir: string;
}

function setup(): Setup {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-ingest-bench-'));
  const db = openDb(path.join(dir, 'svc.db'));
  const orgId = createOrg(db, 'bench').org.org_id;
  const logger = pino({ level: 'silent' });
  const urls = { base: 'http://127.0.0.1:8080', source: '//127.0.0.1:8080/ctl-api', dashboard: 'http://127.0.0.1:8080/dashboard' };
  // batches as the relay would make them (one per group), no relay
  let batch = '';
  const assign = (eventId: string) => (batch ||= eventId);
  const handed = () => void (batch = '');
  const relay = { assign, handoff: handed, piggyback: { write() {}, committed() {}, rolledBack() {} } };
  const queue = QUEUE === 'history' ? relayEventQueue(db, relay, relay, () => true) : embedded!.outboxEventQueue(db, handed);
  const engine = new Engine({
    db,
    bus: createMemoryBus({ logger }),
    clock: systemClock,
    logger,
    metrics: createMetrics({ defaultMetrics: false }),
    urls: () => urls,
    registryRev: () => 1,
    queue,
  });
  return { db, engine, orgId, dir };
}

let seq = 0;
function messages(orgId: string, n: number): Array<{ subject: string; data: Uint8Array }> {
  const out = [];
  for (let i = 0; i < n; i++) {
    const s = seq++;
    if (FACT === 'step') {
      const body = {
        kind: 'workflow_step',
        transition: 'started',
        workflow: JSON.parse(factFor(0)).workflow,
        step: { id: `st_${s}`, name: `step ${s}`, idx: s, execution_type: 'system' },
      };
      out.push({ subject: `svc.ingest.${orgId}.workflows.bwf_0`, data: Buffer.from(JSON.stringify(body)) });
    } else {
      out.push({ subject: `svc.ingest.${orgId}.workflows.bwf_${s}`, data: Buffer.from(factFor(s)) });
    }
  }
  return out;
}

/** Parse and commit `n` messages in groups of `size` (or the messages given); CPU µs (parse, commit) and results. */
function run(
  s: Setup,
  n: number,
  size: number,
  msgs = messages(s.orgId, n),
): { parseUs: number; commitUs: number; sysUs: number; accepted: number } {
  let parseUs = 0;
  let commitUs = 0;
  let sysUs = 0;
  let accepted = 0;
  for (let i = 0; i < msgs.length; i += size) {
    const group = msgs.slice(i, i + size);
    const c0 = process.cpuUsage();
    const facts: ProducerFact[] = group.map((m) => parseIngest(m.subject, m.data));
    const c1 = process.cpuUsage(c0);
    const results = s.engine.ingest(facts);
    const c2 = process.cpuUsage(c0);
    parseUs += c1.user + c1.system;
    commitUs += c2.user + c2.system - (c1.user + c1.system);
    sysUs += c2.system;
    for (const r of results) if (r.ok && r.value === 'accepted') accepted++;
  }
  return { parseUs, commitUs, sysUs, accepted };
}

const s = setup();
run(s, WARMUP, 64);
if (process.env.INGEST_BENCH_PAUSE) {
  // for bench/ingest-instructions.ts: warmed up, the messages made; wait for a byte on stdin (the
  // instruction counters are zeroed meanwhile), commit them in groups of the first size, and stop
  const msgs = messages(s.orgId, N);
  process.stderr.write('ready\n');
  fs.readSync(0, Buffer.alloc(1));
  const r = run(s, N, SIZES[0], msgs);
  if (r.accepted !== N) throw new Error(`only ${r.accepted} of ${N} accepted`);
  process.exit(0);
}
console.log(
  `facts per size ${N}, events queued in the ${QUEUE === 'history' ? 'history row' : 'outbox'}; CPU µs per fact (user+sys); ` +
    `SQLite statements per fact, BEGIN and COMMIT included`,
);
for (const size of SIZES) {
  const r = run(s, N, size);
  if (r.accepted !== N) throw new Error(`only ${r.accepted} of ${N} accepted`);
  const counted = Math.min(N, 2_000);
  const bySql = countStatements(s.db, () => run(s, counted, size));
  const statements = [...bySql.values()].reduce((a, e) => a + e.n, 0);
  console.log(
    `group ${String(size).padStart(3)}: commit ${(r.commitUs / N).toFixed(1).padStart(6)} µs  ` +
      `parse ${(r.parseUs / N).toFixed(1).padStart(5)} µs  ` +
      `total ${((r.commitUs + r.parseUs) / N).toFixed(1).padStart(6)} µs (sys ${(r.sysUs / N).toFixed(1)})  ` +
      `statements ${(statements / counted).toFixed(2)}`,
  );
  if (process.env.INGEST_BENCH_SQL) {
    for (const [sql, e] of [...bySql].sort((a, b) => b[1].us - a[1].us)) {
      console.log(
        `    ${(e.n / counted).toFixed(2).padStart(5)}/fact ${(e.us / counted).toFixed(1).padStart(6)} µs/fact ` +
          ` ${sql.replace(/\s+/g, ' ').slice(0, 110)}`,
      );
    }
  }
}
s.db.close();
fs.rmSync(s.dir, { recursive: true, force: true });
// the engine's timers (checkpoints, pruning) would keep the process alive
process.exit(0);
