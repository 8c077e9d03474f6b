import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Several tests spawn bin/svc.mjs, which runs dist/: rebuild it first when the sources changed.
    globalSetup: ['scripts/build.mjs'],
    testTimeout: 30000,
    hookTimeout: 30000,
    pool: 'forks',
  },
});
