import type { Command } from 'commander';
import { openDb } from '../../store/db.ts';
import { createOrg, createToken, getOrg } from '../../store/orgs.ts';
import { UsageError } from './exit-errors.ts';
import { resolveDataplaneKey } from '../bus/dataplane-key.ts';

const DEFAULT_DB = './data/svc.db';

function dbPath(opt: string | undefined): string {
  return opt ?? process.env.SVC_DB ?? DEFAULT_DB;
}

/** Whether the database at `path` holds the org (`svc nats creds` issues credentials to existing orgs only). */
export function orgExists(path: string, orgId: string): boolean {
  const db = openDb(path);
  try {
    return getOrg(db, orgId) !== undefined;
  } finally {
    db.close();
  }
}

/** `svc orgs create` and `svc tokens create`: bootstrap on the local database (safe while a server runs on it). */
export function registerLocalCommands(program: Command): void {
  const orgs = program.command('orgs').description('manage orgs in the local database');
  orgs
    .command('create')
    .description('create an org and its first API token (printed once)')
    .requiredOption('--name <name>', 'org name')
    .option('--db <path>', 'SQLite database file (SVC_DB)')
    .action((opts: { name: string; db?: string }) => {
      if (!opts.name.trim()) throw new UsageError('--name must not be empty');
      const db = openDb(dbPath(opts.db));
      try {
        const { org, api_token } = createOrg(db, opts.name);
        process.stdout.write(`${JSON.stringify({ org_id: org.org_id, name: org.name, api_token })}\n`);
      } finally {
        db.close();
      }
    });

  const tokens = program.command('tokens').description('manage API tokens in the local database');
  tokens
    .command('create')
    .description('create another API token for an org (printed once)')
    .requiredOption('--org <org_id>', 'org id')
    .option('--name <name>', 'a name for the token')
    .option('--db <path>', 'SQLite database file (SVC_DB)')
    .action((opts: { org: string; name?: string; db?: string }) => {
      const db = openDb(dbPath(opts.db));
      try {
        if (!getOrg(db, opts.org)) throw new UsageError(`no org ${opts.org} in ${dbPath(opts.db)}`);
        const t = createToken(db, opts.org, opts.name ?? null);
        process.stdout.write(`${JSON.stringify(t)}\n`);
      } finally {
        db.close();
      }
    });

  program
    .command('dataplane-key')
    .description("print this database's data plane key, for SVC_DATAPLANE_KEY of a svc worker (keep it secret)")
    .option('--db <path>', 'SQLite database file (SVC_DB)')
    .action((opts: { db?: string }) => {
      const db = openDb(dbPath(opts.db));
      try {
        process.stdout.write(`${resolveDataplaneKey(db, null).toString('base64')}\n`);
      } finally {
        db.close();
      }
    });
}
