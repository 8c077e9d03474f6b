import os from 'node:os';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Several tests spawn bin/svc.mjs, which runs dist/: rebuild it first when the sources changed.
    globalSetup: ['scripts/build.mjs'],
    testTimeout: 30000,
    hookTimeout: 30000,
    pool: 'forks',
    // Test files mostly wait (on HTTP, NATS, child processes): run at least two at once even on a
    // 2-core machine (vitest's default there is one). Measured on 2 cores: 1 file at a time 139 s,
    // 2 at once 99 s, 3 at once 111 s (then they compete for the CPU).
    maxWorkers: Math.max(2, (os.availableParallelism?.() ?? os.cpus().length) - 1),
  },
});
