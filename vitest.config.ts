import os from 'node:os';
import { defineConfig } from 'vitest/config';

// Two sets, run one after the other by `npm test`:
// - the suite (default): every test but the serial set's, several files at once;
// - SVC_TEST_SET=serial: one file at a time. test/isolation asserts one org's latency or memory
//   beside another org's flood, backlog or recoveries in every one of many runs (CONTRACT 8): a
//   bound of 100 ms or 1 s is about svc, not about another test file sharing the two cores. The
//   README walkthroughs (test/readme) and the 3-server cluster (test/system/cluster.test.ts) each
//   run several svc and nats-server processes for minutes: beside other files they would slow those
//   files' own child processes past their start-up timeouts on 2 cores. The ingest ledgers,
//   on one nats-server and on a 3-server cluster (test/system/ingest-ledger*.test.ts), run svc serve,
//   a worker and nats-servers for a minute and assert a p99 of 250 ms on the answers (CONTRACT 9). The burst to
//   2 000 webhooks (test/system/burst.test.ts) asserts that none of 20 000 attempts passes its 5 s; beside other
//   files a wave of new connections once waited that long for the CPU. Two figures the contract
//   pins are asserted alone too: a dry run over 10,000 kept events within 1 s (CONTRACT 10.2,
//   test/http/filter-dry-run.test.ts) and an ordered webhook's rate against an unordered one's
//   (CONTRACT 10.1, test/system/ordered-throughput.test.ts).
const SERIAL = [
  'test/isolation/**/*.test.ts',
  'test/readme/**/*.test.ts',
  'test/system/cluster.test.ts',
  'test/system/ingest-ledger.test.ts',
  'test/system/ingest-ledger-cluster.test.ts',
  'test/system/burst.test.ts',
  'test/http/filter-dry-run.test.ts',
  'test/system/ordered-throughput.test.ts',
];
const serial = process.env.SVC_TEST_SET === 'serial';

export default defineConfig({
  test: {
    include: serial ? SERIAL : ['test/**/*.test.ts'],
    exclude: serial ? [] : [...SERIAL, 'node_modules/**'],
    // Several tests spawn bin/svc.mjs, which runs dist/: rebuild it first when the sources changed.
    globalSetup: ['scripts/build.mjs'],
    testTimeout: 30000,
    hookTimeout: 30000,
    pool: 'forks',
    // Test files mostly wait (on HTTP, NATS, child processes): run at least two at once even on a
    // 2-core machine (vitest's default there is one). Measured on 2 cores: 1 file at a time 139 s,
    // 2 at once 99 s, 3 at once 111 s (then they compete for the CPU).
    maxWorkers: serial ? 1 : Math.max(2, (os.availableParallelism?.() ?? os.cpus().length) - 1),
    fileParallelism: !serial,
  },
});
