import type { Command } from 'commander';
import { openDb } from '../../store/db.ts';
import { createOrg, createToken, getOrg } from '../../store/orgs.ts';
import { insertAudit } from '../../store/audit.ts';
import { isScope, LOCAL_ACTOR, SCOPES, type AuditEntry } from '../domain/scopes.ts';
import type { Db } from '../../store/db.ts';
import { UsageError } from './exit-errors.ts';
import { resolveDataplaneKey } from '../bus/nats/dataplane-key.ts';

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

/** The audit row of a database command's change (CONTRACT 2: actor `local`, no status), in the change's transaction. */
function auditLocal(db: Db, e: Omit<AuditEntry, 'actor' | 'status'>): void {
  const now = Date.now();
  insertAudit(db, { ...e, actor: LOCAL_ACTOR, status: null }, { iso: new Date(now).toISOString(), ms: now });
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
        const { org, api_token } = db
          .transaction(() => {
            const o = createOrg(db, opts.name);
            auditLocal(db, { org_id: o.org.org_id, action: 'orgs.create', resource_type: 'org', resource_id: o.org.org_id });
            auditLocal(db, { org_id: o.org.org_id, action: 'tokens.create', resource_type: 'token', resource_id: o.token_id });
            return o;
          })
          .immediate();
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
    .option('--scope <scope>', `what the token may do: ${SCOPES.join(', ')} (default admin)`, 'admin')
    .option('--db <path>', 'SQLite database file (SVC_DB)')
    .action((opts: { org: string; name?: string; scope: string; db?: string }) => {
      const scope = opts.scope;
      if (!isScope(scope)) throw new UsageError(`--scope must be one of ${SCOPES.join(', ')}`);
      const db = openDb(dbPath(opts.db));
      try {
        if (!getOrg(db, opts.org)) throw new UsageError(`no org ${opts.org} in ${dbPath(opts.db)}`);
        const t = db
          .transaction(() => {
            const made = createToken(db, opts.org, opts.name ?? null, scope);
            auditLocal(db, { org_id: opts.org, action: 'tokens.create', resource_type: 'token', resource_id: made.token_id });
            return made;
          })
          .immediate();
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
