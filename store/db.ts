import Database from 'better-sqlite3';
import fs from 'node:fs';
import path from 'node:path';
import { MIGRATIONS } from './migrations.ts';

export type Db = Database.Database;

/** The page size of a database svc creates (SQLite's default is 4 KiB; BENCHMARKS.md, issue 33 step 14). */
export const PAGE_SIZE = 16384;

export class SchemaTooNewError extends Error {}

/** Open (creating if needed) the SQLite store: WAL, foreign keys, migrations applied in order. */
export function openDb(file: string): Db {
  if (file !== ':memory:') {
    // it holds webhook secrets (CONTRACT 6.7): a directory svc makes is 0700, a database file it
    // makes 0600, and SQLite gives the -wal and -shm files the database file's mode
    fs.mkdirSync(path.dirname(path.resolve(file)), { recursive: true, mode: 0o700 });
    fs.closeSync(fs.openSync(file, 'a', 0o600));
  }
  const db = new Database(file);
  // a new database gets larger pages than SQLite's 4 KiB: a flood of facts writes a fifth of the
  // pages (each an I/O call in the commit, and again in the checkpoint) for the same rows, which
  // are up to a few KiB each (a CloudEvent); an existing one keeps the size it was made with
  if (db.pragma('page_count', { simple: true }) === 0) db.pragma(`page_size = ${PAGE_SIZE}`);
  db.pragma('journal_mode = WAL');
  db.pragma('foreign_keys = ON');
  db.pragma('synchronous = NORMAL');
  db.pragma('busy_timeout = 5000');
  migrate(db);
  cacheStatements(db);
  return db;
}

/**
 * The store calls db.prepare(sql) where it runs a statement; compiling the SQL every time cost
 * about as much as running it. Prepare each distinct SQL text once per connection instead. Safe
 * because no store module changes a statement's mode (pluck/raw/expand/bind) or iterates one.
 */
function cacheStatements(db: Db): void {
  const prepare = db.prepare.bind(db);
  const cache = new Map<string, Database.Statement>();
  db.prepare = ((sql: string) => {
    let stmt = cache.get(sql);
    if (!stmt) cache.set(sql, (stmt = prepare(sql)));
    return stmt;
  }) as Db['prepare'];
}

export function migrate(db: Db): void {
  const current = db.pragma('user_version', { simple: true }) as number;
  const latest = MIGRATIONS.length;
  if (current > latest) {
    throw new SchemaTooNewError(
      `database schema version ${current} is newer than this svc understands (${latest}); upgrade svc or use another --db`,
    );
  }
  for (let v = current; v < latest; v++) {
    db.transaction(() => {
      db.exec(MIGRATIONS[v]);
      db.pragma(`user_version = ${v + 1}`);
    }).immediate();
  }
}

/** The last time formatted, by its ms: rows written in the same millisecond (a group commit's) format it once. */
let formatted = { ms: -1, iso: '' };

export function nowIso(): string {
  const ms = Date.now();
  if (ms !== formatted.ms) formatted = { ms, iso: new Date(ms).toISOString() };
  return formatted.iso;
}

/** JSON column helpers. */
export const toJson = (v: unknown): string | null => (v === undefined || v === null ? null : JSON.stringify(v));
export function fromJson<T>(s: string | null | undefined, fallback: T): T {
  if (s === null || s === undefined) return fallback;
  return JSON.parse(s) as T;
}

/**
 * Insert one row: `values` names the columns, in order, with what goes in them (JSON columns
 * already encoded): `INSERT INTO <table> (<columns>) VALUES (?, …)`.
 */
export function insertRow(db: Db, table: string, values: Record<string, unknown>): void {
  const columns = Object.keys(values);
  db.prepare(`INSERT INTO ${table} (${columns.join(', ')}) VALUES (${columns.map(() => '?').join(', ')})`).run(...Object.values(values));
}
