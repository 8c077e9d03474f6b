// Ingest alone, two checkouts against each other on this machine: each its own nats-server and
// `svc serve --no-deliver` (as bench/scenarios.ts runIngestScenario starts it), measured in turn,
// A B A B …, so that a change can be told from the machine's drift (on a shared 2-vCPU machine one
// round of the same code moves ±20 % from the next; a pair of neighbours moves together). Prints
// each pair's B/A facts/s and CPU per fact, and their medians.
//
//   npx tsx bench/ingest-ab.ts DIR_A DIR_B [pairs, default 8] [facts per round, default 20000]
// AB_A_ENV / AB_B_ENV ('K=V K2=V2'): environment of one side's svc only (a knob tried both ways);
// AB_A_NODE_ARGS / AB_B_NODE_ARGS: node's own options for one side's svc (V8 flags NODE_OPTIONS refuses).
// DIR: a checkout with bin/svc.mjs and a built dist/ (before-runs: `git archive REV | tar -x -C DIR`,
// node_modules linked, `node scripts/build.mjs`).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { runIngestPhase, svcCpuPids, type IngestResult } from './harness.ts';
import { sleep, spawnChild, startNats, stopChild, UNLIMITED_ORG_ENV, type Child, type Nats } from './procs.ts';

const [dirA, dirB] = process.argv.slice(2, 4).map((d) => path.resolve(d));
if (!dirA || !dirB) throw new Error('usage: npx tsx bench/ingest-ab.ts DIR_A DIR_B [pairs] [facts]');
const PAIRS = Number(process.argv[4] ?? 8);
const FACTS = Number(process.argv[5] ?? 20_000);
const WINDOW = 1000;
const median = (v: number[]): number => {
  const s = [...v].sort((x, y) => x - y);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-ingest-ab-'));

interface Side {
  name: string;
  nats: Nats;
  serve: Child;
  nc: NatsConnection;
  orgId: string;
}

async function side(name: string, root: string): Promise<Side> {
  const bin = path.join(root, 'bin', 'svc.mjs');
  const env: Record<string, string> = {
    ...UNLIMITED_ORG_ENV,
    ...Object.fromEntries(
      (process.env[`AB_${name}_ENV`] ?? '')
        .split(/\s+/)
        .filter(Boolean)
        .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
    ),
  };
  const db = path.join(tmp, `${name}.db`);
  const out = execFileSync(process.execPath, [bin, 'orgs', 'create', '--name', `ab-${name}`, '--db', db], {
    cwd: root,
    env: { ...process.env, ...env },
  }).toString();
  const orgId = (JSON.parse(out.trim().split('\n').pop() ?? '{}') as { org_id: string }).org_id;
  const nats = await startNats();
  const serve = await spawnChild(
    `svc serve ${name}`,
    [
      ...(process.env[`AB_${name}_NODE_ARGS`] ?? '').split(/\s+/).filter(Boolean),
      bin,
      'serve',
      '--nats',
      nats.url,
      '--db',
      db,
      '--port',
      '0',
      '--no-local-runner',
      '--drift-interval',
      'off',
      '--no-deliver',
    ],
    env,
    (l) => l.includes('listening on'),
    path.join(tmp, `${name}-serve.log`),
  );
  const nc = await connect({ servers: nats.url, name: `ab-${name}`, noAsyncTraces: true });
  return { name, nats, serve, nc, orgId };
}

let seq = 1;
const phase = (s: Side, label: string, facts: number): Promise<IngestResult> => {
  const firstSeq = seq;
  seq += facts;
  return runIngestPhase(s.nc, {
    name: label,
    orgId: s.orgId,
    facts,
    firstSeq,
    window: WINDOW,
    timeLimitMs: 60_000,
    cpuPids: svcCpuPids(s.serve.pid, s.nats.pid),
  });
};

const a = await side('A', dirA);
const b = await side('B', dirB);
const rows: Array<{ ratio: number; a: IngestResult; b: IngestResult }> = [];
try {
  await phase(a, 'A warm-up', 2000);
  await phase(b, 'B warm-up', 2000);
  for (let i = 1; i <= PAIRS; i++) {
    // A first in odd pairs, B first in even ones: neither always follows the other's writes
    const order = i % 2 ? [a, b] : [b, a];
    const got = new Map<string, IngestResult>();
    for (const s of order) {
      await sleep(300);
      got.set(s.name, await phase(s, `${s.name} ${i}`, FACTS));
    }
    const ra = got.get('A')!;
    const rb = got.get('B')!;
    const ratio = rb.facts_per_sec / ra.facts_per_sec;
    rows.push({ ratio, a: ra, b: rb });
    const cpu = (r: IngestResult) =>
      `${r.facts_per_sec} facts/s, svc ${r.cpu_us_per_fact.sut} µs, engine ${r.cpu_us_per_fact.sut_main} µs, ` +
      `nats ${r.cpu_us_per_fact.nats} µs`;
    console.log(`pair ${i}: B/A ${ratio.toFixed(3)}   A ${cpu(ra)}   B ${cpu(rb)}`);
  }
  const med = (f: (r: (typeof rows)[number]) => number | null) => median(rows.map(f).filter((x): x is number => x !== null));
  console.log(
    `median B/A facts/s ${med((r) => r.ratio).toFixed(3)}; svc µs/fact A ${med((r) => r.a.cpu_us_per_fact.sut)} ` +
      `B ${med((r) => r.b.cpu_us_per_fact.sut)}; ` +
      `engine A ${med((r) => r.a.cpu_us_per_fact.sut_main)} B ${med((r) => r.b.cpu_us_per_fact.sut_main)}; nats ` +
      `A ${med((r) => r.a.cpu_us_per_fact.nats)} B ${med((r) => r.b.cpu_us_per_fact.nats)}`,
  );
} finally {
  for (const s of [a, b]) {
    await s.nc.close().catch(() => {});
    await stopChild(s.serve.child);
    await s.nats.stop();
  }
  fs.rmSync(tmp, { recursive: true, force: true });
}
