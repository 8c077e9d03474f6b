#!/usr/bin/env node
// The `svc` command. Runs the compiled JavaScript in dist/ (`npm run build`; `npm ci` builds it).
// In a source checkout whose dist/ is missing or older than the sources, it runs the TypeScript
// sources through tsx instead (a dev dependency; slower to start), saying so on stderr.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const argv = process.argv.slice(2);

// A reader that goes away (`svc … | head`) is not an error of svc: stop quietly, exit 0 (CONTRACT 7).
process.stdout.on('error', (err) => {
  if (err.code === 'EPIPE') process.exit(0);
  throw err;
});

/** The CLI's main(): from dist/, or from the sources through tsx; null when neither can run. */
async function loadMain() {
  const { distState } = await import('../scripts/dist-state.mjs');
  const root = fileURLToPath(new URL('..', import.meta.url));
  const dist = distState(root);
  if (dist.state === 'fresh') return (await import('../dist/src/cli/main.js')).main;
  const why = dist.state === 'missing' ? 'dist/ is missing' : `dist/ is older than ${dist.newer}`;
  let register;
  try {
    if (!dist.sources) throw new Error('no sources');
    ({ register } = await import('tsx/esm/api'));
  } catch {
    process.stderr.write(`svc: ${why}; run \`npm run build\` in ${root} (after \`npm ci\`)\n`);
    return null;
  }
  process.stderr.write(`svc: ${why}; running the TypeScript sources through tsx (\`npm run build\` makes svc start faster)\n`);
  register();
  return (await import('../src/cli/main.ts')).main;
}

if (argv.length === 1 && (argv[0] === '--version' || argv[0] === '-V')) {
  // `svc --version` needs nothing but package.json.
  process.stdout.write(`${JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).version}\n`);
} else {
  const main = await loadMain();
  if (main) await main(argv);
  else process.exitCode = 1;
}
