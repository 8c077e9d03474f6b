import { Command, CommanderError } from 'commander';
import { ApiError, UsageError } from './errors.ts';

/** Build the `svc` program. Each command group registers itself. */
export async function buildProgram(): Promise<Command> {
  const program = new Command('svc')
    .description('svc: CloudEvents webhooks and config rollback for deployment orchestration')
    .exitOverride()
    .showHelpAfterError(true);
  const groups = await Promise.allSettled([
    import('./serve.ts').then((m) => m.registerServeCommand(program)),
    import('./local.ts').then((m) => m.registerLocalCommands(program)),
    import('./api-commands.ts').then((m) => m.registerApiCommands(program)),
    import('./listen.ts').then((m) => m.registerListenCommand(program)),
    import('./worker.ts').then((m) => m.registerWorkerCommand(program)),
    import('./nats.ts').then((m) => m.registerNatsCommands(program)),
  ]);
  for (const g of groups) if (g.status === 'rejected' && process.env.SVC_DEBUG_CLI) console.error(g.reason);
  return program;
}

export async function main(argv: string[]): Promise<void> {
  const program = await buildProgram();
  try {
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
