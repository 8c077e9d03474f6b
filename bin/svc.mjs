#!/usr/bin/env node
// The `svc` command: runs the TypeScript sources through tsx, no build step needed.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../src/cli/main.ts');
await main(process.argv.slice(2));
