// Stores on files of their own for the tests of one file (svc's openDb, a new temporary directory
// each), every one closed after the test that opened it. Call once at a test file's top level.
import path from 'node:path';
import type Database from 'better-sqlite3';
import { afterEach } from 'vitest';
import { openDb, type Db } from '../../store/db.ts';
import { tmpDir } from './service.ts';

export function tempStores(prefix: string): {
  /** a new store, migrated */
  open(): Db;
  /** close `d` too after the test (a database opened some other way) */
  closeAfter<D extends Database.Database>(d: D): D;
} {
  const opened: Database.Database[] = [];
  afterEach(() => {
    for (const d of opened.splice(0)) if (d.open) d.close();
  });
  const closeAfter = <D extends Database.Database>(d: D): D => {
    opened.push(d);
    return d;
  };
  return { open: () => closeAfter(openDb(path.join(tmpDir(prefix), 'svc.db'))), closeAfter };
}
