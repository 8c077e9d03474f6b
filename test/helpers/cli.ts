// Running the `svc` command in tests, two ways:
//  - runCli: main(argv) of src/cli/main.ts in this process (milliseconds instead of a Node start-up
//    per call), with the process's SVC_* variables, stdin, stdout, stderr and exit code swapped for
//    the call's and put back afterwards;
//  - runCliProcess: `node bin/svc.mjs …` as a child process, for the tests of the binary itself
//    (exit codes as a shell sees them, a real stdin pipe).
// Both give the same result, so a test can move from one to the other without changing an assertion.
import { spawn } from 'node:child_process';
import { Readable } from 'node:stream';
import { main } from '../../src/cli/main.ts';
import { BIN, ROOT } from './paths.ts';

export interface CliResult {
  /** The exit code (null: a child process killed by a signal). */
  code: number | null;
  stdout: string;
  stderr: string;
  /** stdout parsed as JSON, undefined when it is not JSON. */
  json: any;
}

const parseJson = (text: string): unknown => {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
};

/** This process's environment without its SVC_* variables. */
const baseEnv = (): Record<string, string> =>
  Object.fromEntries(Object.entries(process.env).filter(([k, v]) => !k.startsWith('SVC_') && v !== undefined)) as Record<string, string>;

/** Calls of runCli take turns: each one owns the process's globals while it runs. */
let turn: Promise<unknown> = Promise.resolve();

/**
 * Run `svc <args>` in this process, as bin/svc.mjs does (main(argv), exit code on process.exitCode),
 * with stdin not a terminal (empty, or `input`) and stdout/stderr not terminals either (as through a
 * pipe). The process's SVC_* variables are replaced by `env` for the call. Concurrent calls run one
 * after the other.
 */
export function runCli(args: string[], env: Record<string, string> = {}, input?: string): Promise<CliResult> {
  const run = turn.then(() => runNow(args, env, input));
  turn = run.catch(() => undefined);
  return run;
}

type Restore = () => void;

/** Set an own property of `target` for the call; the returned function puts the old one back. */
function override(target: object, key: PropertyKey, value: unknown): Restore {
  const before = Object.getOwnPropertyDescriptor(target, key);
  Object.defineProperty(target, key, { value, configurable: true, enumerable: before?.enumerable ?? true, writable: true });
  return () => {
    if (before) Object.defineProperty(target, key, before);
    else delete (target as Record<PropertyKey, unknown>)[key];
  };
}

/** A write() that appends to `out` instead of writing to the stream. */
function capture(out: { text: string }) {
  return (
    chunk: string | Uint8Array,
    encoding?: BufferEncoding | ((err?: Error | null) => void),
    cb?: (err?: Error | null) => void,
  ): boolean => {
    out.text += typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString(typeof encoding === 'string' ? encoding : 'utf8');
    const done = typeof encoding === 'function' ? encoding : cb;
    if (done) process.nextTick(done);
    return true;
  };
}

async function runNow(args: string[], env: Record<string, string>, input: string | undefined): Promise<CliResult> {
  const stdout = { text: '' };
  const stderr = { text: '' };
  const restores: Restore[] = [];
  const exitCodeBefore = process.exitCode;
  const envKeys = new Set([...Object.keys(process.env).filter((k) => k.startsWith('SVC_')), ...Object.keys(env)]);
  const envBefore = Object.fromEntries([...envKeys].map((k) => [k, process.env[k]]));
  try {
    // the environment: no SVC_* variable but those of the call
    for (const k of Object.keys(process.env)) if (k.startsWith('SVC_')) delete process.env[k];
    Object.assign(process.env, env);
    // stdin: a stream of `input` (or nothing), not a terminal
    const stdin = Readable.from(input === undefined || input === '' ? [] : [Buffer.from(input)], { objectMode: false }) as Readable & {
      isTTY?: boolean;
    };
    restores.push(override(process, 'stdin', stdin));
    // stdout and stderr: captured, not terminals (help is not wrapped to a terminal's width)
    restores.push(override(process.stdout, 'write', capture(stdout)), override(process.stdout, 'isTTY', false));
    restores.push(override(process.stderr, 'write', capture(stderr)), override(process.stderr, 'isTTY', false));
    process.exitCode = undefined;
    await main(args);
    const code = process.exitCode ?? 0;
    return { code: typeof code === 'string' ? Number(code) : code, stdout: stdout.text, stderr: stderr.text, json: parseJson(stdout.text) };
  } finally {
    for (const restore of restores.reverse()) restore();
    for (const k of Object.keys(process.env)) if (k.startsWith('SVC_')) delete process.env[k];
    for (const [k, v] of Object.entries(envBefore)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
    process.exitCode = exitCodeBefore;
  }
}

/**
 * Run `node bin/svc.mjs <args>` with stdin not a terminal (empty, or `input` through a pipe). SVC_*
 * variables come only from `env`.
 */
export function runCliProcess(args: string[], env: Record<string, string> = {}, input?: string, timeoutMs = 25_000): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [BIN, ...args], {
      cwd: ROOT,
      env: { ...baseEnv(), ...env },
      stdio: [input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
    });
    if (input !== undefined) p.stdin!.end(input);
    let stdout = '';
    let stderr = '';
    p.stdout!.on('data', (d) => (stdout += d));
    p.stderr!.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => {
      p.kill('SIGKILL');
      reject(new Error(`svc ${args.join(' ')} timed out\n${stdout}\n${stderr}`));
    }, timeoutMs);
    p.on('error', reject);
    p.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr, json: parseJson(stdout) });
    });
  });
}
