// Instructions per fact of the ingest hot path (bench/ingest-engine.ts: parse and group commit on
// one thread, real SQLite file, no NATS), counted by valgrind's callgrind after the warm-up: on a
// shared 2-vCPU machine whose CPU time per fact moves ±10 % between runs of the same code, the
// instruction count of the same code repeats within about half a per cent, so a change of a few per
// cent can be told from noise in one pair of runs. It counts user-space instructions only: the
// kernel's share (SQLite's writes, ~20 % of the CPU time here) and the cost of a cache miss are not
// in it; SHA-256 is counted in its AVX2 form (valgrind has no SHA extensions), so signatures and
// seals weigh more than on the machine. Confirm a change found here with CPU time.
//
//   npx tsx bench/ingest-instructions.ts [facts, default 4000] [group size, default 64] [workflow|step] [history|outbox]
//     [--runs 2] [--root DIR]
// --root DIR: count the build of another checkout (its bench/ingest-engine.ts and sources, with
// node_modules linked), so that a change is counted before and after.
// Needs valgrind (on every machine kind here). A run takes about a minute and a half.
//   npx tsx bench/ingest-instructions.ts --status-book [batches, default 20] [--runs 2] [--root DIR]
// counts the engine's outcome path instead (bench/status-book.ts: batches of 1 000 outcomes
// applied by the status book), per outcome.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const positional = process.argv.slice(2).filter((a, i, all) => !a.startsWith('--') && !(all[i - 1] ?? '').startsWith('--'));
const arg = (name: string, dflt: string): string => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] ? process.argv[i + 1] : dflt;
};
const FACTS = Number(positional[0] ?? 4000);
const GROUP = positional[1] ?? '64';
const FACT = positional[2] ?? 'workflow';
const QUEUE = positional[3] ?? 'history';
const RUNS = Number(arg('runs', '2'));
const HERE = path.join(import.meta.dirname, '..');
const ROOT = path.resolve(arg('root', HERE));
/** --status-book [batches]: the outcome path (this checkout's bench/status-book.ts, on ROOT's modules) */
const at = process.argv.indexOf('--status-book');
const BOOK_BATCHES = at < 0 ? 0 : /^\d+$/.test(process.argv[at + 1] ?? '') ? Number(process.argv[at + 1]) : 20;
const UNITS = BOOK_BATCHES ? BOOK_BATCHES * 1000 : FACTS;
const HARNESS = BOOK_BATCHES
  ? { cwd: HERE, args: ['bench/status-book.ts', String(BOOK_BATCHES)], env: { PAUSE: '1', SVC_BENCH_ROOT: ROOT } }
  : { cwd: ROOT, args: ['bench/ingest-engine.ts', String(FACTS), GROUP, FACT, QUEUE], env: { INGEST_BENCH_PAUSE: '1' } };

function count(): Promise<number> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-instructions-'));
  const child = spawn(
    'valgrind',
    [
      '--tool=callgrind',
      '--smc-check=all-non-file',
      `--callgrind-out-file=${path.join(dir, 'callgrind.out')}`,
      process.execPath,
      '--predictable',
      '--import',
      'tsx',
      ...HARNESS.args,
    ],
    { cwd: HARNESS.cwd, env: { ...process.env, ...HARNESS.env }, stdio: ['pipe', 'ignore', 'pipe'] },
  );
  let err = '';
  let zeroed = false;
  return new Promise((resolve, reject) => {
    child.stderr.on('data', (chunk: Buffer) => {
      err += chunk.toString();
      if (!zeroed && /^ready$/m.test(err)) {
        zeroed = true;
        // the warm-up's instructions out; then the facts are committed
        const z = spawnSync('callgrind_control', ['--zero', String(child.pid)], { encoding: 'utf8' });
        if (z.status !== 0) return reject(new Error(`callgrind_control: ${z.stderr || z.stdout}`));
        child.stdin.end('x');
      }
    });
    child.on('error', reject);
    child.on('exit', (code) => {
      fs.rmSync(dir, { recursive: true, force: true });
      const m = /Collected : (\d+)/.exec(err);
      if (code !== 0 || !zeroed || !m) return reject(new Error(`valgrind exited ${code}:\n${err.slice(-2000)}`));
      resolve(Number(m[1]));
    });
  });
}

const unit = BOOK_BATCHES ? 'outcome' : 'fact';
console.log(
  BOOK_BATCHES
    ? `instructions per outcome (callgrind, after the warm-up): ${UNITS} outcomes in batches of 1000, applied by the status ` +
        `book; svc from ${ROOT}`
    : `instructions per fact (callgrind, after the warm-up): ${FACTS} facts in groups of ${GROUP}, ${FACT}, events queued in ` +
        `the ${QUEUE}; svc from ${ROOT}`,
);
for (let r = 1; r <= RUNS; r++) {
  const n = await count();
  console.log(`run ${r}: ${Math.round(n / UNITS)} instructions per ${unit}`);
}
