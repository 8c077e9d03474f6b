// store/db.ts: opening a store applies the migrations in order, once, and refuses a schema newer
// than the code knows (`svc serve` turns that into exit 1: test/cli/serve.test.ts).
import path from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { openDb, SchemaTooNewError } from '../../store/db.ts';
import { MIGRATIONS } from '../../store/migrations.ts';
import { tmpDir } from '../helpers/service.ts';

describe('openDb', () => {
  it('applies every migration to a new file, and none again on the next open', () => {
    const file = path.join(tmpDir(), 'nested', 'svc.db'); // the folder is created too
    const db = openDb(file);
    expect(db.pragma('user_version', { simple: true })).toBe(MIGRATIONS.length);
    db.prepare("INSERT INTO orgs (org_id, name, created_at) VALUES ('org_kept', 'kept', '2026-01-01T00:00:00.000Z')").run();
    db.close();
    const again = openDb(file);
    try {
      expect(again.pragma('user_version', { simple: true })).toBe(MIGRATIONS.length);
      expect(again.prepare("SELECT name FROM orgs WHERE org_id = 'org_kept'").get()).toEqual({ name: 'kept' });
      expect(again.pragma('journal_mode', { simple: true })).toBe('wal');
      expect(again.pragma('foreign_keys', { simple: true })).toBe(1);
    } finally {
      again.close();
    }
  });

  it('refuses a database with a newer schema than the code knows, and leaves it as it was', () => {
    const file = path.join(tmpDir(), 'svc.db');
    openDb(file).close();
    const db = new Database(file);
    db.pragma(`user_version = ${MIGRATIONS.length + 1}`);
    db.close();
    expect(() => openDb(file)).toThrow(SchemaTooNewError);
    const check = new Database(file, { readonly: true });
    try {
      expect(check.pragma('user_version', { simple: true })).toBe(MIGRATIONS.length + 1);
    } finally {
      check.close();
    }
  });
});
