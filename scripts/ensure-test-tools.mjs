#!/usr/bin/env node
// Run by `npm test` before vitest: makes sure the tests' outside tools are there — a nats-server
// binary (NATS tests) and Debian's Chromium (dashboard browser tests, driven by playwright-core).
// Found → silent. Missing and root with apt-get → install the Debian package. Else say what to
// install and exit 1.
import { accessSync, constants, statSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { spawnSync } from 'node:child_process';

const DIRS = ['/usr/sbin', '/usr/bin', '/usr/local/bin', '/usr/local/sbin'];

function isExecutable(file) {
  try {
    if (!statSync(file).isFile()) return false;
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

function findOnPath(name) {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (!dir) continue;
    const file = join(dir, name);
    if (isExecutable(file)) return file;
  }
  return null;
}

function findNatsServer() {
  const fromEnv = process.env.SVC_NATS_SERVER;
  if (fromEnv && isExecutable(fromEnv)) return fromEnv;
  for (const dir of DIRS) {
    const file = join(dir, 'nats-server');
    if (isExecutable(file)) return file;
  }
  return findOnPath('nats-server');
}

function findChromium() {
  const fromEnv = process.env.SVC_CHROMIUM;
  if (fromEnv && isExecutable(fromEnv)) return fromEnv;
  return isExecutable('/usr/bin/chromium') ? '/usr/bin/chromium' : null;
}

function tryAptInstall(pkg) {
  const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
  const aptGet = isExecutable('/usr/bin/apt-get') ? '/usr/bin/apt-get' : findOnPath('apt-get');
  if (!isRoot || !aptGet) return false;
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  process.stderr.write(`ensure-test-tools: ${pkg} not found; installing it with apt-get\n`);
  // An index refresh that fails (offline mirror, …) is not fatal: the package may still be installable.
  spawnSync(aptGet, ['update', '-qq'], { stdio: 'inherit', env });
  const r = spawnSync(aptGet, ['install', '-y', '-qq', pkg], { stdio: 'inherit', env });
  return r.status === 0;
}

const TOOLS = [
  {
    pkg: 'nats-server',
    find: findNatsServer,
    help: 'nats-server is required for the NATS tests: install it with `apt-get install -y nats-server` (Debian) or put it on PATH / set SVC_NATS_SERVER',
  },
  {
    pkg: 'chromium',
    find: findChromium,
    help: 'Chromium is required for the dashboard browser tests: install it with `apt-get install -y chromium` (Debian) or set SVC_CHROMIUM to its path',
  },
];

let missing = 0;
for (const tool of TOOLS) {
  if (tool.find()) continue;
  if (tryAptInstall(tool.pkg) && tool.find()) continue;
  process.stderr.write(`${tool.help}\n`);
  missing++;
}
process.exit(missing ? 1 : 0);
