// `svc nats init` and `svc nats creds` (CONTRACT 1, 6.7): NATS decentralized auth for svc.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { InvalidArgumentError, type Command } from 'commander';
import { NatsSetupError } from '../bus/nats/nats-creds.ts';
import { initNatsDir, NATS_FILES, producerCreds } from './nats-init/nats-setup.ts';
import { UsageError } from './exit-errors.ts';

function parsePort(v: string): number {
  if (!/^\d+$/.test(v) || Number(v) < 1 || Number(v) > 65535) throw new InvalidArgumentError('a port number from 1 to 65535');
  return Number(v);
}

function parseClusterSize(v: string): number {
  if (!/^\d+$/.test(v) || Number(v) < 3 || Number(v) > 5) throw new InvalidArgumentError('a cluster of 3 to 5 servers');
  return Number(v);
}

/** Setup errors (a used or missing directory, a bad org id) are usage errors: exit 2. */
async function asUsage<T>(f: () => Promise<T>): Promise<T> {
  try {
    return await f();
  } catch (err) {
    if (err instanceof NatsSetupError) throw new UsageError(err.message);
    throw err;
  }
}

/**
 * The top of the git work tree holding `file` of `dir` when git would not ignore that file (a
 * secret that `git add .` would commit); null outside a work tree, when ignored, or without git.
 */
export function unignoredWorkTree(dir: string, file: string): string | null {
  const git = (...args: string[]) => spawnSync('git', args, { cwd: dir, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  const top = git('rev-parse', '--show-toplevel');
  if (top.error || top.status !== 0) return null;
  const ignored = git('check-ignore', '-q', file);
  return ignored.status === 1 ? top.stdout.trim() : null;
}

export function registerNatsCommands(program: Command): void {
  const nats = program.command('nats').description('NATS credentials: a server configuration and credentials for each svc role');

  nats
    .command('init')
    .description(
      'write DIR/nats.conf (JetStream, authentication required), DIR/engine.creds and DIR/worker.creds; ' +
        'with --cluster N, DIR/nats-1.conf … nats-N.conf for a cluster',
    )
    .requiredOption('--dir <dir>', 'directory to write into (created if missing; must not hold a setup already)')
    .option(
      '--port <port>',
      "port nats-server listens on for clients (with --cluster on one machine: the first server's, the others take the next ones)",
      parsePort,
      4222,
    )
    .option(
      '--cluster <n>',
      'a cluster of N servers (3 to 5): one configuration each, routes between them, the same accounts',
      parseClusterSize,
    )
    .option(
      '--hosts <hosts>',
      'with --cluster: the host of each server, comma-separated (three machines); default all on 127.0.0.1',
      (v: string) =>
        v
          .split(',')
          .map((h) => h.trim())
          .filter(Boolean),
    )
    .option('--cluster-port <port>', "with --cluster: the route port (on one machine: the first server's)", parsePort, 6222)
    .action(async (opts: { dir: string; port: number; cluster?: number; hosts?: string[]; clusterPort: number }) => {
      if (!opts.cluster && opts.hosts) throw new UsageError('--hosts needs --cluster N');
      const cluster = opts.cluster ? { size: opts.cluster, hosts: opts.hosts, clusterPort: opts.clusterPort } : undefined;
      const r = await asUsage(() => initNatsDir({ dir: opts.dir, port: opts.port, cluster }));
      const tracked = unignoredWorkTree(r.dir, NATS_FILES.engineCreds);
      if (tracked) {
        process.stderr.write(
          `warning: ${r.dir} is inside the git work tree ${tracked} and git does not ignore it: its .creds and signing key are secrets; ` +
            `add it to .gitignore (or use a directory outside the checkout)\n`,
        );
      }
      const creds = [
        `  ${NATS_FILES.engineCreds}  credentials of the engine (svc serve --nats-creds); secret`,
        `  ${NATS_FILES.workerCreds}  credentials of delivery workers (svc worker --nats-creds); secret`,
        `  ${NATS_FILES.producerSigningKey}  signs producer credentials (svc nats creds); secret`,
      ];
      if (!r.servers.length) {
        const url = `nats://127.0.0.1:${r.port}`;
        process.stdout.write(
          [
            `wrote a NATS setup in ${r.dir}:`,
            `  ${NATS_FILES.conf}  nats-server configuration: 127.0.0.1:${r.port}, JetStream in ${r.storeDir}, every client authenticates`,
            ...creds,
            `start the server:  nats-server -c ${r.files.conf}`,
            `then:              svc serve --nats ${url} --nats-creds ${r.files.engineCreds}`,
            `                   svc worker --nats ${url} --nats-creds ${r.files.workerCreds}`,
            `a producer of an org:  svc nats creds --dir ${r.dir} --org ORG_ID > ORG_ID.creds`,
            '',
          ].join('\n'),
        );
        return;
      }
      const seeds = r.servers.map((s) => s.url).join(',');
      process.stdout.write(
        [
          `wrote a NATS cluster setup of ${r.servers.length} servers in ${r.dir}:`,
          ...r.servers.map(
            (s) =>
              `  ${s.conf.slice(r.dir.length + 1)}  ${s.name}: clients on ${s.url.slice('nats://'.length)}, JetStream in ${s.storeDir}`,
          ),
          ...creds,
          'start each server (on its machine):',
          ...r.servers.map((s) => `  nats-server -c ${s.conf}`),
          `then:  svc serve --nats ${seeds} --nats-creds ${r.files.engineCreds}`,
          `       svc worker --nats ${seeds} --nats-creds ${r.files.workerCreds}`,
          `every stream and bucket svc uses is kept on 3 servers (--nats-replicas): losing one of them loses nothing`,
          `a producer of an org:  svc nats creds --dir ${r.dir} --org ORG_ID > ORG_ID.creds`,
          '',
        ].join('\n'),
      );
    });

  nats
    .command('creds')
    .description('print the NATS credentials of a producer of an org (publish svc.ingest.<org>.>, subscribe svc.jobs.<org>.>)')
    .requiredOption('--dir <dir>', 'directory written by `svc nats init`')
    .requiredOption('--org <org_id>', 'org id (an org of the database)')
    .option('--db <path>', "svc serve's SQLite database, where the org must exist (SVC_DB, default ./data/svc.db)")
    .action(async (opts: { dir: string; org: string; db?: string }) => {
      const creds = await asUsage(() => producerCreds(opts.dir, opts.org));
      const { orgExists } = await import('./local.ts');
      const db = opts.db ?? process.env.SVC_DB ?? './data/svc.db';
      if (!existsSync(db)) throw new UsageError(`no database at ${db}: pass --db (the one svc serve uses) so that the org can be checked`);
      if (!orgExists(db, opts.org)) throw new UsageError(`no org ${opts.org} in ${db}: credentials are issued only to an org that exists`);
      process.stdout.write(creds);
    });
}
