import { readFileSync } from 'node:fs';
import { Command, CommanderError } from 'commander';
import { ApiError, UsageError } from './exit-errors.ts';

type Register = (program: Command) => void;

/**
 * The command groups: the top-level commands each one registers, and how to load it. A call loads
 * only the group of the command it names (`svc serve` does not load the API client, `svc webhooks`
 * not the server); help and unknown commands load them all; `svc --version` loads none.
 */
const GROUPS: Array<{ commands: string[]; load: () => Promise<Register> }> = [
  { commands: ['serve'], load: async () => (await import('./serve.ts')).registerServeCommand },
  { commands: ['orgs', 'tokens', 'dataplane-key'], load: async () => (await import('./local.ts')).registerLocalCommands },
  {
    commands: ['webhooks', 'installs', 'branches', 'workflows', 'apps', 'configs', 'events', 'audit', 'approvals', 'trigger', 'ingest'],
    load: async () => (await import('./api-commands.ts')).registerApiCommands,
  },
  { commands: ['listen'], load: async () => (await import('./listen.ts')).registerListenCommand },
  { commands: ['worker'], load: async () => (await import('./worker.ts')).registerWorkerCommand },
  { commands: ['nats'], load: async () => (await import('./nats-commands.ts')).registerNatsCommands },
  { commands: ['produce'], load: async () => (await import('./produce.ts')).registerProduceCommands },
];

const VERSION_FLAGS = ['-V', '--version'];

/** The version in the package.json above this module (src/cli/ or dist/src/cli/ alike). */
export function packageVersion(): string {
  let dir = new URL('.', import.meta.url);
  for (let i = 0; i < 6; i++) {
    dir = new URL('..', dir);
    let text: string;
    try {
      text = readFileSync(new URL('package.json', dir), 'utf8');
    } catch {
      continue;
    }
    const pkg = JSON.parse(text) as { name?: string; version?: string };
    if (pkg.name === 'svc' && pkg.version) return pkg.version;
  }
  return '0.0.0-unknown';
}

/**
 * Build the `svc` program. Each command group registers itself. With argv, only the groups that
 * call needs are loaded; a group that fails to load is an error when its command was asked for.
 */
export async function buildProgram(argv?: string[]): Promise<Command> {
  const program = new Command('svc')
    .description('svc: CloudEvents webhooks and config rollback for deployment orchestration')
    .version(packageVersion(), '-V, --version', 'print the version')
    .exitOverride()
    .showHelpAfterError(true);
  const first = argv?.[0];
  if (first !== undefined && VERSION_FLAGS.includes(first)) return program;
  const named = first === undefined ? undefined : GROUPS.find((g) => g.commands.includes(first));
  if (named) {
    (await named.load())(program);
    return program;
  }
  // Load them all at once, register them in GROUPS order (the order help lists them in).
  const groups = await Promise.allSettled(GROUPS.map((g) => g.load()));
  for (const g of groups) {
    if (g.status === 'fulfilled') g.value(program);
    else if (process.env.SVC_DEBUG_CLI) console.error(g.reason);
  }
  return program;
}

export async function main(argv: string[]): Promise<void> {
  try {
    const program = await buildProgram(argv);
    await program.parseAsync(argv, { from: 'user' });
  } catch (err) {
    process.exitCode = exitCodeFor(err);
  }
}

function exitCodeFor(err: unknown): number {
  if (err instanceof CommanderError) {
    if (err.code === 'commander.helpDisplayed' || err.code === 'commander.version' || err.exitCode === 0) return 0;
    return 2;
  }
  if (err instanceof UsageError) {
    process.stderr.write(`error: ${err.message}\n`);
    return 2;
  }
  if (err instanceof ApiError) {
    process.stderr.write(`error: ${err.message} (HTTP ${err.status} ${err.code})\n`);
    return 1;
  }
  process.stderr.write(`error: ${err instanceof Error ? err.message : String(err)}\n`);
  return 1;
}
