#!/usr/bin/env node
// Run by `npm test` before vitest: makes sure the tests' outside tools are there — a nats-server
// binary (NATS tests) and Debian's Chromium (dashboard browser tests, driven by playwright-core).
// Found → silent. Missing and root with apt-get → say so in one line (what, why and the command),
// then install the Debian packages. Else say what to install and exit 1.
import { accessSync, constants, statSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { pathToFileURL } from 'node:url';

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

const TOOLS = [
  {
    pkg: 'nats-server',
    why: 'the NATS tests',
    find: findNatsServer,
    help:
      'nats-server is required for the NATS tests: install it with `apt-get install -y nats-server` (Debian) or put it on ' +
      'PATH / set SVC_NATS_SERVER',
  },
  {
    pkg: 'chromium',
    why: "the dashboard's browser tests",
    find: findChromium,
    help:
      'Chromium is required for the dashboard browser tests: install it with `apt-get install -y chromium` (Debian) or set ' +
      'SVC_CHROMIUM to its path',
  },
];

/** `a`, `a and b`, `a, b and c` */
const listed = (xs) => (xs.length < 2 ? xs.join('') : `${xs.slice(0, -1).join(', ')} and ${xs[xs.length - 1]}`);

/**
 * The line said before apt-get runs (issue 56: `npm test` never installs anything without saying
 * so first): what is missing, what it is for, and the command.
 */
export function installLine(tools) {
  return (
    `ensure-test-tools: npm test needs ${listed(tools.map((t) => `${t.pkg} (${t.why})`))}, not found: ` +
    `installing Debian's package${tools.length === 1 ? '' : 's'} ${tools.map((t) => t.pkg).join(' ')} (apt-get update, then ` +
    `apt-get install -y)\n`
  );
}

/**
 * Find the tools; install the missing ones with apt-get when root and apt-get is there (saying so
 * first, in one line); else say what to install. Returns the exit code: 0 when every tool is found.
 * The outside world comes in `io` so that a test can drive it.
 */
export function ensureTestTools(io = {}) {
  const {
    tools = TOOLS,
    isRoot = typeof process.getuid === 'function' && process.getuid() === 0,
    aptGet = isExecutable('/usr/bin/apt-get') ? '/usr/bin/apt-get' : findOnPath('apt-get'),
    run = (cmd, args) => spawnSync(cmd, args, { stdio: 'inherit', env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } }).status,
    write = (text) => process.stderr.write(text),
  } = io;
  let absent = tools.filter((t) => !t.find());
  if (absent.length && isRoot && aptGet) {
    write(installLine(absent));
    // An index refresh that fails (offline mirror, …) is not fatal: the packages may still be installable.
    run(aptGet, ['update', '-qq']);
    // one package at a time: one that a mirror lacks does not keep the other out
    for (const t of absent) run(aptGet, ['install', '-y', '-qq', t.pkg]);
    absent = absent.filter((t) => !t.find());
  }
  for (const t of absent) write(`${t.help}\n`);
  return absent.length ? 1 : 0;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) process.exit(ensureTestTools());
