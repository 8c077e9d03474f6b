// The README's shell walkthroughs, extracted and run as written (issue 32), wherever they live:
// README.md and docs/*.md (issue 50: docs as a tree; `readDocs`).
//
// A walkthrough step is a ```sh block right after a marker comment, invisible on GitHub:
//
//   <!-- walkthrough: quickstart background=server ready="listening on" -->
//
// The first word names the walkthrough (steps of one name run in their file's order; the blocks of
// one walkthrough are kept in one file); then options, `key=value` or `key="value"`, keys repeatable:
//   background=P       the block starts a long-running process P (a terminal of its own); a running P
//                      is stopped first (Ctrl-C: SIGINT to its process group, then waited for)
//   ready="RE"         with background: wait until P's output matches RE (as a reader waits for it)
//   stop=P             before the block: stop P (Ctrl-C) and check that it exited 0
//   expect-P="RE"      after the block: wait until P's output (all of it so far) matches RE, as a
//                      reader watches terminal P (e.g. expect-receiver="workflow: provision")
//   output="RE"        the block's own output (stdout and stderr) must match RE
//   exit=N             the block must exit N (default 0): a command shown failing on purpose
//   until="RE"         run the block again (a read-only one) until its output matches RE
// Every other block runs in one shell session (bash -e -o pipefail; variables and exports carry
// from block to block), in a fresh directory. The README's commands are not rewritten, with two
// exceptions, both made by the harness, not by the README: `npm`/`npx` run this checkout (`npx svc`
// is bin/svc.mjs, `npm start -- ARGS` is `svc serve ARGS`, and `npm ci` installs nothing: the
// dependencies are this checkout's), and the README's fixed ports (8080, 8081, 9000) become free
// ones, the same in every block (and in nats.conf, copied beside), with SVC_PORT and SVC_API_URL set
// to the one that stands for 8080 (svc serve's and the CLI's default). NATS's port is not rewritten:
// the walkthroughs take it from SVC_NATS_PORT (issue 56), which the session sets to a free port, as
// a reader with another NATS on 4222 would.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { freePort } from '../helpers/nats-server.ts';
import { waitFor } from '../helpers/wait.ts';

export interface Step {
  walkthrough: string;
  /** the file it is in, as messages name it ('README' when not told) */
  file: string;
  /** 1-based line of the ```sh fence in its file */
  line: number;
  code: string;
  background?: string;
  ready?: string;
  stop: string[];
  expect: Array<{ proc: string; re: string }>;
  output?: string;
  exit: number;
  until?: string;
}

export class WalkthroughError extends Error {
  override readonly name = 'WalkthroughError';
}

const MARKER = /^<!--\s*walkthrough:\s*([a-z0-9-]+)(.*?)-->\s*$/;
const OPTION = /\s*([a-z][a-z0-9-]*)=(?:"([^"]*)"|(\S+))/y;

/** The marked steps of a README, in order. A marker not followed by a ```sh block, or a bad option, throws. */
export function extractSteps(markdown: string, file = 'README'): Step[] {
  const lines = markdown.split('\n');
  const steps: Step[] = [];
  for (let i = 0; i < lines.length; i++) {
    const m = MARKER.exec(lines[i]);
    if (!m) {
      if (/<!--\s*walkthrough/.test(lines[i]))
        throw new WalkthroughError(`${file} line ${i + 1}: a walkthrough marker that does not parse: ${lines[i]}`);
      continue;
    }
    const step: Step = { walkthrough: m[1], file, line: i + 2, code: '', stop: [], expect: [], exit: 0 };
    const rest = m[2].trimEnd();
    OPTION.lastIndex = 0;
    while (OPTION.lastIndex < rest.length) {
      const start = OPTION.lastIndex;
      const o = OPTION.exec(rest);
      if (!o) throw new WalkthroughError(`${file} line ${i + 1}: cannot read the options from ${JSON.stringify(rest.slice(start).trim())}`);
      const [, key, quoted, bare] = o;
      const value = quoted ?? bare;
      if (key === 'background') step.background = value;
      else if (key === 'ready') step.ready = value;
      else if (key === 'stop') step.stop.push(value);
      else if (key.startsWith('expect-')) step.expect.push({ proc: key.slice('expect-'.length), re: value });
      else if (key === 'output') step.output = value;
      else if (key === 'until') step.until = value;
      else if (key === 'exit' && /^\d+$/.test(value)) step.exit = Number(value);
      else throw new WalkthroughError(`${file} line ${i + 1}: unknown walkthrough option ${key}=${value}`);
    }
    if (lines[i + 1]?.trim() !== '```sh')
      throw new WalkthroughError(`${file} line ${i + 1}: a walkthrough marker must be followed by a \`\`\`sh block`);
    const end = lines.findIndex((l, j) => j > i + 1 && l.trim() === '```');
    if (end < 0) throw new WalkthroughError(`${file} line ${i + 2}: the \`\`\`sh block never ends`);
    step.code = lines.slice(i + 2, end).join('\n');
    if (step.ready && !step.background) throw new WalkthroughError(`${file} line ${i + 1}: ready= needs background=`);
    steps.push(step);
    i = end;
  }
  return steps;
}

/** README.md, then docs/*.md (by name): where walkthroughs live, each with its path from the root. */
export function readDocs(root: string): Array<{ file: string; text: string }> {
  const docs = fs.existsSync(path.join(root, 'docs'))
    ? fs
        .readdirSync(path.join(root, 'docs'))
        .filter((f) => f.endsWith('.md'))
        .sort()
    : [];
  return ['README.md', ...docs.map((f) => `docs/${f}`)].map((file) => ({ file, text: fs.readFileSync(path.join(root, file), 'utf8') }));
}

/** The marked steps of every file, each file's in its order; a walkthrough whose blocks are in two files throws. */
export function extractAll(docs: Array<{ file: string; text: string }>): Step[] {
  const steps = docs.flatMap((d) => extractSteps(d.text, d.file));
  const home = new Map<string, string>();
  for (const s of steps) {
    const f = home.get(s.walkthrough);
    if (f !== undefined && f !== s.file)
      throw new WalkthroughError(`walkthrough ${s.walkthrough} has blocks in ${f} and ${s.file}: keep a walkthrough's blocks in one file`);
    home.set(s.walkthrough, s.file);
  }
  return steps;
}

/** The walkthroughs' names, in the order they first appear. */
export function walkthroughNames(steps: Step[]): string[] {
  return [...new Set(steps.map((s) => s.walkthrough))];
}

export const README_PORTS = [8080, 8081, 9000] as const;

/** Every process group a session started and has not stopped: killed if the test process exits first. */
const groups = new Set<number>();
process.once('exit', () => {
  for (const pid of groups) {
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      // gone
    }
  }
});

interface Background {
  name: string;
  child: ChildProcess;
  output: string;
  exited: Promise<number | null>;
  exitCode?: number | null;
}

export interface SessionOptions {
  root: string;
  dir: string;
  /** how long a ready=, expect- or until= waits (default 60 s) */
  waitMs?: number;
  /** where to report what runs (default: nowhere) */
  log?: (line: string) => void;
}

/**
 * One reader following the README: a shell session in `dir`, the background processes it started,
 * and the port mapping. `run(step)` throws a WalkthroughError naming the README line on a failure.
 */
export class Session {
  private readonly bg = new Map<string, Background>();
  private readonly ports = new Map<number, number>();
  /** SVC_NATS_PORT in every block: a free port, not NATS's default 4222 */
  natsPort = 0;
  private readonly bin: string;
  private readonly state: string;
  private readonly waitMs: number;
  private readonly log: (line: string) => void;
  /** everything every process printed, for a failure's message */
  readonly transcript: string[] = [];

  private constructor(private readonly o: SessionOptions) {
    this.bin = path.join(o.dir, '.readme-test', 'bin');
    this.state = path.join(o.dir, '.readme-test', 'state.sh');
    this.waitMs = o.waitMs ?? 60_000;
    this.log = o.log ?? (() => undefined);
  }

  static async open(o: SessionOptions): Promise<Session> {
    const s = new Session(o);
    for (const p of README_PORTS) s.ports.set(p, await freePort());
    s.natsPort = await freePort();
    fs.mkdirSync(s.bin, { recursive: true });
    const svc = `"${process.execPath}" "${path.join(o.root, 'bin', 'svc.mjs')}"`;
    // npx svc: this checkout's svc; npm start -- ARGS: svc serve ARGS (as npm runs it, only what follows -- is passed on)
    fs.writeFileSync(
      path.join(s.bin, 'npx'),
      `#!/usr/bin/env bash\nif [ "$1" = svc ]; then shift; exec ${svc} "$@"; fi\n` +
        `echo "npx $1: only svc runs in the README test" >&2; exit 127\n`,
      { mode: 0o755 },
    );
    fs.writeFileSync(
      path.join(s.bin, 'npm'),
      [
        '#!/usr/bin/env bash',
        'case "$1" in',
        '  ci) echo "npm ci: (README test) the dependencies are the checkout\'s"; exit 0 ;;',
        '  start) shift; while [ $# -gt 0 ] && [ "$1" != -- ]; do shift; done; [ "$1" = -- ] && shift',
        `     exec ${svc} serve "$@" ;;`,
        '  *) echo "npm $1: not in the README test" >&2; exit 127 ;;',
        'esac',
        '',
      ].join('\n'),
      { mode: 0o755 },
    );
    fs.writeFileSync(path.join(o.dir, 'nats.conf'), s.mapPorts(fs.readFileSync(path.join(o.root, 'nats.conf'), 'utf8')));
    // the session's variables start empty; the baseline is what bash defines itself
    fs.writeFileSync(s.state, '');
    return s;
  }

  /** The README's fixed ports replaced by this session's free ones. */
  mapPorts(text: string): string {
    return text.replace(/\b(8080|8081|9000)\b/g, (p) => String(this.ports.get(Number(p))));
  }

  private env(): NodeJS.ProcessEnv {
    const env: NodeJS.ProcessEnv = {};
    for (const [k, v] of Object.entries(process.env))
      if (!k.startsWith('SVC_') && !k.startsWith('npm_') && !k.startsWith('VITEST')) env[k] = v;
    // a fresh shell: no node_modules/.bin of the test run on PATH, the shims first
    const paths = (process.env.PATH ?? '').split(path.delimiter).filter((p) => p && !p.includes('node_modules'));
    env.PATH = [this.bin, ...paths].join(path.delimiter);
    // the defaults that are the README's fixed ports: svc serve's port and the CLI's API URL
    env.SVC_PORT = String(this.ports.get(8080));
    env.SVC_API_URL = `http://127.0.0.1:${this.ports.get(8080)}`;
    // as a reader who has another NATS on 4222 sets it (the walkthroughs' `${SVC_NATS_PORT:-4222}`)
    env.SVC_NATS_PORT = String(this.natsPort);
    return env;
  }

  /** bash source of one block: the session's variables, the block, then the variables saved for the next. */
  private script(code: string, save: boolean): string {
    const body = this.mapPorts(code);
    if (!save) return `source ${JSON.stringify(this.state)}\n${body}\n`;
    // Save the variables this session made (not bash's own): `declare -p` of the names not in the baseline.
    return [
      `__base="$(compgen -v)"`,
      `source ${JSON.stringify(this.state)}`,
      'set -eo pipefail',
      body,
      'set +e',
      `for __v in $(compgen -v); do case "$__v" in ` +
        `__*|BASH*|FUNCNAME|PIPESTATUS|_|COLUMNS|LINES|OLDPWD|PWD|SHLVL|RANDOM|SECONDS|LINENO|HISTCMD|EPOCH*|SRANDOM|GROUPS|DIRSTACK) ` +
        `continue ;; esac; grep -qx "$__v" <<<"$__base" && ` +
        `[ "$(declare -p "$__v" 2>/dev/null | cut -c1-11)" != "declare -x " ] && continue; ` +
        `declare -p "$__v"; done > ${JSON.stringify(this.state)}.new`,
      `mv ${JSON.stringify(this.state)}.new ${JSON.stringify(this.state)}`,
      '',
    ].join('\n');
  }

  private where(step: Step): string {
    return `${step.file} line ${step.line} (walkthrough ${step.walkthrough})`;
  }

  async run(step: Step): Promise<void> {
    for (const p of step.stop) await this.stop(p, true, step);
    if (step.background) await this.startBackground(step);
    else await this.runBlock(step);
    for (const e of step.expect) {
      await this.waitForOutput(e.proc, new RegExp(e.re), `${this.where(step)}: expect-${e.proc}="${e.re}"`);
    }
  }

  private async runBlock(step: Step): Promise<void> {
    const end = Date.now() + this.waitMs;
    // with `until`, the block runs again every 500 ms until its output matches it or waitMs have passed
    const r = await waitFor(
      async () => {
        const ran = await this.shell(step.code);
        this.transcript.push(`$ (${step.file} line ${step.line})\n${step.code}\n${ran.output}[exit ${ran.code}]`);
        this.log(`${step.file} line ${step.line}: exit ${ran.code}\n${ran.output}`);
        const again = step.until !== undefined && !new RegExp(step.until).test(ran.output) && Date.now() < end;
        return again ? null : ran;
      },
      Number.POSITIVE_INFINITY, // ends by itself once waitMs have passed (the checks below say so)
      'the block',
      500,
    );
    if (r.code !== step.exit)
      throw new WalkthroughError(`${this.where(step)}: exit ${r.code}, expected ${step.exit}\n${step.code}\n--- output:\n${r.output}`);
    if (step.output !== undefined && !new RegExp(step.output).test(r.output)) {
      throw new WalkthroughError(`${this.where(step)}: output does not match ${step.output}\n--- output:\n${r.output}`);
    }
    if (step.until !== undefined && !new RegExp(step.until).test(r.output)) {
      throw new WalkthroughError(
        `${this.where(step)}: output never matched ${step.until} within ${this.waitMs} ms\n--- last output:\n${r.output}`,
      );
    }
  }

  private shell(code: string): Promise<{ code: number | null; output: string }> {
    return new Promise((resolve, reject) => {
      const child = spawn('bash', ['-c', this.script(code, true)], { cwd: this.o.dir, env: this.env(), stdio: ['ignore', 'pipe', 'pipe'] });
      let output = '';
      child.stdout!.on('data', (d) => (output += d));
      child.stderr!.on('data', (d) => (output += d));
      const timer = setTimeout(() => child.kill('SIGKILL'), Math.max(this.waitMs, 120_000));
      child.on('error', reject);
      child.on('exit', (code) => {
        clearTimeout(timer);
        resolve({ code, output });
      });
    });
  }

  private async startBackground(step: Step): Promise<void> {
    const name = step.background!;
    if (this.bg.has(name)) await this.stop(name, false, step);
    // its own process group, so that stopping it stops whatever its line started
    const child = spawn('bash', ['-c', this.script(step.code, false)], {
      cwd: this.o.dir,
      env: this.env(),
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    const b: Background = {
      name,
      child,
      output: '',
      exited: new Promise((ok) => child.once('exit', (code, signal) => ok(code ?? (signal ? 128 : null)))),
    };
    groups.add(child.pid!);
    void b.exited.then((code) => {
      b.exitCode = code;
      groups.delete(child.pid!);
    });
    child.stdout!.on('data', (d) => (b.output += d));
    child.stderr!.on('data', (d) => (b.output += d));
    this.bg.set(name, b);
    this.log(`${step.file} line ${step.line}: started ${name}`);
    if (step.ready) await this.waitForOutput(name, new RegExp(step.ready), `${this.where(step)}: ${name} ready="${step.ready}"`);
  }

  /** Ctrl-C in P's terminal; with `check`, P must exit 0. */
  async stop(name: string, check: boolean, step?: Step): Promise<void> {
    const b = this.bg.get(name);
    if (!b) throw new WalkthroughError(`${step ? this.where(step) : 'stop'}: no process ${name} to stop`);
    this.bg.delete(name);
    if (b.exitCode === undefined) {
      try {
        process.kill(-b.child.pid!, 'SIGINT');
      } catch {
        // gone already
      }
      const t = setTimeout(() => {
        try {
          process.kill(-b.child.pid!, 'SIGKILL');
        } catch {
          // gone
        }
      }, 20_000);
      await b.exited;
      clearTimeout(t);
    }
    this.transcript.push(`[${name}]\n${b.output}[exit ${b.exitCode}]`);
    if (check && b.exitCode !== 0)
      throw new WalkthroughError(
        `${step ? this.where(step) : ''}: ${name} exited ${b.exitCode} on Ctrl-C, expected 0\n--- its output:\n${b.output}`,
      );
  }

  /** What background process P printed so far. */
  outputOf(name: string): string {
    return this.bg.get(name)?.output ?? '';
  }

  private async waitForOutput(name: string, re: RegExp, what: string): Promise<void> {
    const end = Date.now() + this.waitMs;
    const seen = () => {
      const b = this.bg.get(name);
      if (!b) throw new WalkthroughError(`${what}: no process ${name}`);
      if (re.test(b.output)) return true;
      if (b.exitCode !== undefined) throw new WalkthroughError(`${what}: ${name} exited ${b.exitCode}\n--- its output:\n${b.output}`);
      if (Date.now() > end) throw new WalkthroughError(`${what}: not seen within ${this.waitMs} ms\n--- ${name}'s output:\n${b.output}`);
      return false;
    };
    await waitFor(seen, Number.POSITIVE_INFINITY, what, 100); // ends by itself once waitMs have passed
  }

  /** Stop every background process (the end of the session); kills what does not stop. */
  async close(): Promise<void> {
    for (const name of [...this.bg.keys()].reverse()) await this.stop(name, false).catch(() => undefined);
  }
}

/** Run every step of `steps` in order in one session; the first failure throws. */
export async function runSteps(steps: Step[], o: SessionOptions): Promise<Session> {
  const s = await Session.open(o);
  try {
    for (const step of steps) await s.run(step);
  } finally {
    await s.close();
  }
  return s;
}
