// Summarise V8 .cpuprofile files (from BENCH_SVC_NODE_ARGS="--cpu-prof --cpu-prof-dir=DIR"): the
// top functions by self time, each with its share of the profile's samples.
//   npx tsx bench/profile-summary.ts DIR_OR_FILE… [--top N]
import fs from 'node:fs';
import path from 'node:path';

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: Node[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

const args = process.argv.slice(2);
const topAt = args.indexOf('--top');
const TOP = topAt >= 0 ? Number(args[topAt + 1]) : 25;
const inputs = args.filter((a, i) => a !== '--top' && (topAt < 0 || i !== topAt + 1));
const files = inputs.flatMap((p) =>
  fs.statSync(p).isDirectory()
    ? fs
        .readdirSync(p)
        .filter((f) => f.endsWith('.cpuprofile'))
        .map((f) => path.join(p, f))
    : [p],
);

const short = (url: string) =>
  url
    .replace(/^file:\/\//, '')
    .replace(/^.*\/node_modules\//, 'nm:')
    .replace(/^.*\/(dist|src|store|bench)\//, '$1/');

for (const file of files) {
  const prof = JSON.parse(fs.readFileSync(file, 'utf8')) as Profile;
  const byId = new Map(prof.nodes.map((n) => [n.id, n]));
  const self = new Map<number, number>();
  for (let i = 0; i < prof.samples.length; i++) self.set(prof.samples[i], (self.get(prof.samples[i]) ?? 0) + (prof.timeDeltas[i] ?? 0));
  const total = [...self.values()].reduce((a, b) => a + b, 0);
  const agg = new Map<string, number>();
  for (const [id, us] of self) {
    const n = byId.get(id)!;
    const cf = n.callFrame;
    const key = `${cf.functionName || '(anonymous)'} ${cf.url ? `${short(cf.url)}:${cf.lineNumber + 1}` : ''}`.trim();
    agg.set(key, (agg.get(key) ?? 0) + us);
  }
  const idle = [...agg.entries()].filter(([k]) => k.startsWith('(idle)')).reduce((a, [, v]) => a + v, 0);
  console.log(`\n${path.basename(file)}: ${(total / 1e6).toFixed(1)} s sampled, ${(((total - idle) / total) * 100).toFixed(0)} % busy`);
  const rows = [...agg.entries()]
    .filter(([k]) => !k.startsWith('(idle)'))
    .sort((a, b) => b[1] - a[1])
    .slice(0, TOP);
  for (const [k, us] of rows)
    console.log(`${((us / (total - idle)) * 100).toFixed(1).padStart(5)} %  ${(us / 1000).toFixed(0).padStart(6)} ms  ${k}`);
}
