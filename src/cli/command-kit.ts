// The plumbing of the API commands (CONTRACT 7): command groups and leaves that accept the global
// API options before or after their arguments, and a handler that gets the options, the arguments
// and a lazily resolved API client.
import type { Command } from 'commander';
import { UsageError } from './exit-errors.ts';
import { printFields, printJson } from './output.ts';
import { createApiClient, resolveConnection, type ApiClient, type GlobalApiOptions } from './api-client.ts';

export type Opts = GlobalApiOptions & Record<string, unknown>;

export interface Run {
  /** Options of the command, its groups' options merged in (the leaf's win). */
  opts: Opts;
  /** The command's positional arguments. */
  args: string[];
  json: boolean;
  /** The API client; resolving it checks token and org (a UsageError when missing). */
  api(): ApiClient;
}

/** Add the global API options (CONTRACT 7) to a command, so they work before or after its arguments. */
function withApiOptions(cmd: Command): Command {
  return cmd
    .option('--api-url <url>', 'svc API base URL (SVC_API_URL, default http://127.0.0.1:8080)')
    .option('--token <token>', 'API token (SVC_API_TOKEN)')
    .option('--org <org_id>', 'org id (SVC_ORG_ID)')
    .option('--json', 'print the response as JSON');
}

/** A command group (`svc webhooks`, …) that also accepts the global options. */
export function group(program: Command, name: string, description: string): Command {
  return withApiOptions(program.command(name).description(description));
}

/** A leaf command with the global options and an async handler. */
export function leaf(parent: Command, nameAndArgs: string, description: string): Command {
  return withApiOptions(parent.command(nameAndArgs).description(description));
}

export function handle(cmd: Command, fn: (run: Run) => Promise<void>): Command {
  return cmd.action(async (...actionArgs: unknown[]) => {
    const command = actionArgs[actionArgs.length - 1] as Command;
    const opts = command.optsWithGlobals<Opts>();
    let client: ApiClient | undefined;
    const run: Run = {
      opts,
      args: command.processedArgs.filter((a) => a !== undefined).map((a) => String(a)),
      json: opts.json === true,
      api: () => (client ??= createApiClient(resolveConnection(opts))),
    };
    await fn(run);
  });
}

export const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

/** The answer of one attempt made now (a ping, a resend). */
export interface AttemptNow {
  delivered: boolean;
  status?: number | null;
  error?: string | null;
  duration_ms?: number;
}

/** Print an attempt made now either way; one that was not delivered fails the command (exit 1). */
export function reportAttempt(run: Run, r: AttemptNow, what: string): void {
  if (run.json) printJson(r);
  else {
    printFields([
      ['delivered', r.delivered ? 'yes' : 'no'],
      ['status', r.status],
      ['error', r.error],
      ['duration_ms', r.duration_ms],
    ]);
  }
  if (!r.delivered) throw new Error(`${what} was not delivered${r.error ? ` (${r.error})` : r.status ? ` (HTTP ${r.status})` : ''}`);
}

/** `k=v,k=v` of --selector as match_labels. */
export function parseSelector(text: string): Record<string, string> {
  const labels: Record<string, string> = {};
  for (const part of text.split(',')) {
    const eq = part.indexOf('=');
    if (eq <= 0) throw new UsageError(`--selector ${JSON.stringify(text)}: each part is key=value (e.g. ring=canary,region=eu)`);
    labels[part.slice(0, eq).trim()] = part.slice(eq + 1).trim();
  }
  return labels;
}
