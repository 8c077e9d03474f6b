// scripts/ensure-test-tools.mjs (run by `npm test` first): found tools → silent; missing ones, as
// root with apt-get → one line saying what it will install, why and how, before apt-get runs
// (issue 56); else what to install, exit 1. The outside world (finding, apt-get, root, stderr) is
// injected; the real script is also run as npm test runs it.
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ensureTestTools, type Tool } from '../../scripts/ensure-test-tools.mjs';
import { ROOT } from '../helpers/paths.ts';

/** A tool found once `installed` holds its package. */
const tool = (pkg: string, why: string, installed: Set<string>): Tool => ({
  pkg,
  why,
  find: () => (installed.has(pkg) ? `/usr/bin/${pkg}` : null),
  help: `${pkg} is required: install it`,
});

/** What happened, in order: lines written and commands run. */
function world(o: { installed: string[]; installable?: string[]; isRoot?: boolean; aptGet?: string | null }) {
  const installed = new Set(o.installed);
  const happened: string[] = [];
  const tools = [tool('nats-server', 'the NATS tests', installed), tool('chromium', "the dashboard's browser tests", installed)];
  const code = ensureTestTools({
    tools,
    isRoot: o.isRoot ?? true,
    aptGet: o.aptGet === undefined ? '/usr/bin/apt-get' : o.aptGet,
    write: (t) => happened.push(`say: ${t}`),
    run: (cmd, args) => {
      happened.push(`run: ${cmd} ${args.join(' ')}`);
      if (args[0] === 'install' && (o.installable ?? [args[args.length - 1]]).includes(args[args.length - 1]))
        installed.add(args[args.length - 1]);
      return 0;
    },
  });
  return { code, happened };
}

describe('ensure-test-tools', () => {
  it('says what it will install, why and with which command, in one line before apt-get runs', () => {
    const { code, happened } = world({ installed: [] });
    expect(code).toBe(0);
    expect(happened).toEqual([
      "say: ensure-test-tools: npm test needs nats-server (the NATS tests) and chromium (the dashboard's browser tests), not " +
        "found: installing Debian's packages nats-server chromium (apt-get update, then apt-get install -y)\n",
      'run: /usr/bin/apt-get update -qq',
      'run: /usr/bin/apt-get install -y -qq nats-server',
      'run: /usr/bin/apt-get install -y -qq chromium',
    ]);
  });

  it('names only what is missing', () => {
    const { code, happened } = world({ installed: ['nats-server'] });
    expect(code).toBe(0);
    expect(happened[0]).toBe(
      "say: ensure-test-tools: npm test needs chromium (the dashboard's browser tests), not found: installing Debian's package " +
        'chromium (apt-get update, then apt-get install -y)\n',
    );
    expect(happened.slice(1)).toEqual(['run: /usr/bin/apt-get update -qq', 'run: /usr/bin/apt-get install -y -qq chromium']);
  });

  it('everything found: says nothing, runs nothing', () => {
    expect(world({ installed: ['nats-server', 'chromium'] })).toEqual({ code: 0, happened: [] });
  });

  it('not root, or no apt-get: runs nothing, says what to install, exit 1; an install that fails says so too', () => {
    for (const o of [{ isRoot: false }, { aptGet: null }]) {
      const { code, happened } = world({ installed: ['chromium'], ...o });
      expect(code).toBe(1);
      expect(happened).toEqual(['say: nats-server is required: install it\n']);
    }
    const failed = world({ installed: [], installable: ['chromium'] });
    expect(failed.code).toBe(1);
    expect(failed.happened[0]).toMatch(/^say: ensure-test-tools: npm test needs nats-server .* and chromium/);
    expect(failed.happened.at(-1)).toBe('say: nats-server is required: install it\n');
  });

  it('the script as npm test runs it: with the tools of this machine found, silent and exit 0', () => {
    const r = spawnSync(process.execPath, [path.join(ROOT, 'scripts', 'ensure-test-tools.mjs')], { encoding: 'utf8' });
    expect(r.stderr).toBe('');
    expect(r.stdout).toBe('');
    expect(r.status).toBe(0);
  });
});
