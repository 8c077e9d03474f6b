// One `svc serve` per database (CONTRACT 1): the serving process holds an operating-system lock on a
// small file beside the database, `<db>.lock`, for as long as it runs. The lock is SQLite's own
// (a POSIX advisory lock taken by an open `BEGIN IMMEDIATE`, with nothing written), so the kernel
// releases it the moment the holder dies, kill -9 and power loss included: a dead holder never
// blocks the next start, and no pid check (wrong across containers and after pid reuse) decides
// anything. The pid and start time in the file are only what the refusal message says.
// The database commands (`svc orgs create`, …) never look at the lock: they work beside the holder.
//
// The lock is the file's, not its name's (CONTRACT 8): symlinks are resolved to the file they name,
// and the lock file lives beside that file, so every path through a symlink or a bind mount finds
// the same lock. A hard link is another name in another directory, where another lock file would
// sit: a database file with more than one link is refused (SQLite keeps its journal and WAL beside
// each name, so two processes going through two links would corrupt it anyway).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';

/** A running `svc serve` holds the database. */
export class StoreInUseError extends Error {
  override readonly name = 'StoreInUseError';
  constructor(
    readonly file: string,
    readonly holder: Holder | undefined,
  ) {
    super(`${file} is in use by svc serve (pid ${holder?.pid ?? 'unknown'}, since ${holder?.since ?? 'unknown'})`);
  }
}

/** The database file has other names (hard links): another `svc serve` could open it by one of them. */
export class StoreHardLinkedError extends Error {
  override readonly name = 'StoreHardLinkedError';
  constructor(
    readonly file: string,
    readonly links: number,
  ) {
    super(`${file} has ${links} hard links: svc serve refuses a database file with more than one name (remove the other links)`);
  }
}

export interface Holder {
  pid: number;
  host: string;
  /** ISO 8601 */
  since: string;
}

export interface StoreLock {
  readonly file: string;
  release(): void;
}

/** The lock file of a database file: beside it, named after the file it really is (symlinks resolved). */
export function lockFileOf(dbFile: string): string {
  const abs = path.resolve(dbFile);
  let real = abs;
  try {
    real = fs.realpathSync(abs);
  } catch {
    try {
      real = path.join(fs.realpathSync(path.dirname(abs)), path.basename(abs));
    } catch {
      real = abs;
    }
  }
  return `${real}.lock`;
}

/**
 * Locks this process holds, by lock file. A lock lives as long as its connection, so the connection
 * must not be collected; and a second connection to a held file is never opened, since closing any
 * descriptor of a file drops every POSIX lock the process has on it.
 */
const held = new Map<string, { lock: Database.Database; holder: Holder }>();

/**
 * Take the database's serve lock, or throw StoreInUseError naming the holder. Nothing of the
 * database is opened or changed here; call it before anything opens the store for writing.
 * `:memory:` has nothing to share and takes no lock.
 */
export function lockStore(dbFile: string, now: () => Date = () => new Date()): StoreLock {
  if (dbFile === ':memory:') return { file: dbFile, release() {} };
  refuseHardLinks(dbFile);
  const file = lockFileOf(dbFile);
  const mine = held.get(file);
  if (mine) throw new StoreInUseError(dbFile, mine.holder);
  // the database's own directory rules (CONTRACT 6.7): a directory svc makes is 0700
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  fs.closeSync(fs.openSync(file, 'a', 0o600));
  // a short busy wait: only to read the holder while it writes its row, never to wait for the lock
  const lock = new Database(file, { timeout: 1000 });
  const me: Holder = { pid: process.pid, host: os.hostname(), since: now().toISOString() };
  try {
    for (let tries = 0; ; tries++) {
      if (!take(lock)) throw new StoreInUseError(dbFile, readHolder(lock));
      // Ours. The row says who holds it; written in a commit of its own (a reader sees only what is
      // committed), then the lock is taken again. Someone who took it in between holds it now.
      const current = readHolder(lock);
      if (current && current.pid === me.pid && current.host === me.host && current.since === me.since) break;
      if (tries >= 3) break; // the row is only for the message; the lock is what counts
      lock.exec(
        'CREATE TABLE IF NOT EXISTS holder ' +
          '(id INTEGER PRIMARY KEY CHECK (id = 1), pid INTEGER NOT NULL, host TEXT NOT NULL, since TEXT NOT NULL)',
      );
      lock.prepare('INSERT OR REPLACE INTO holder (id, pid, host, since) VALUES (1, ?, ?, ?)').run(me.pid, me.host, me.since);
      lock.exec('COMMIT');
    }
  } catch (err) {
    lock.close();
    throw err;
  }
  held.set(file, { lock, holder: me });
  return {
    file,
    release() {
      if (held.get(file)?.lock !== lock) return;
      held.delete(file);
      try {
        lock.exec('ROLLBACK');
      } finally {
        lock.close();
      }
    },
  };
}

/** Throw StoreHardLinkedError when the database file (symlinks followed) exists with more than one link. */
function refuseHardLinks(dbFile: string): void {
  let links: number;
  try {
    links = fs.statSync(dbFile).nlink;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return; // a new database: nothing links to it yet
    throw err;
  }
  if (links > 1) throw new StoreHardLinkedError(dbFile, links);
}

/** BEGIN IMMEDIATE without waiting: true when this connection now holds the write lock. */
function take(lock: Database.Database): boolean {
  const wait = lock.pragma('busy_timeout', { simple: true }) as number;
  lock.pragma('busy_timeout = 0');
  try {
    lock.exec('BEGIN IMMEDIATE');
    return true;
  } catch (err) {
    if ((err as { code?: string }).code === 'SQLITE_BUSY') return false;
    throw err;
  } finally {
    lock.pragma(`busy_timeout = ${wait}`);
  }
}

function readHolder(lock: Database.Database): Holder | undefined {
  try {
    const table = lock.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'holder'").get();
    if (!table) return undefined;
    return lock.prepare('SELECT pid, host, since FROM holder WHERE id = 1').get() as Holder | undefined;
  } catch {
    return undefined;
  }
}
