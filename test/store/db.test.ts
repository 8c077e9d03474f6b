// store/db.ts: opening a store applies the migrations in order, once, and refuses a schema newer
// than the code knows (`svc serve` turns that into exit 1: test/cli/serve.test.ts).
import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { openDb, PAGE_SIZE, SchemaTooNewError } from '../../store/db.ts';
import { MIGRATIONS } from '../../store/migrations.ts';
import { tmpDir } from '../helpers/service.ts';

describe('openDb', () => {
  it('makes the database 0600 (its -wal and -shm too) in a directory of its own made 0700: it holds webhook secrets', () => {
    const dir = path.join(tmpDir('svc-db-mode-'), 'data', 'nested');
    const file = path.join(dir, 'svc.db');
    const umask = process.umask(0o022); // the usual umask, whatever this process runs with
    try {
      const db = openDb(file);
      db.prepare("INSERT INTO orgs (org_id, name, created_at) VALUES ('org_mode', 'm', '2026-01-01T00:00:00Z')").run();
      const mode = (p: string) => fs.statSync(p).mode & 0o777;
      expect(mode(file).toString(8)).toBe('600');
      expect(mode(`${file}-wal`).toString(8)).toBe('600');
      expect(mode(`${file}-shm`).toString(8)).toBe('600');
      expect(mode(dir).toString(8)).toBe('700');
      expect(mode(path.dirname(dir)).toString(8)).toBe('700');
      db.close();
    } finally {
      process.umask(umask);
    }
  });

  it('a new database is made with 16 KiB pages; one made before, with 4 KiB pages, keeps them and its rows', () => {
    const fresh = path.join(tmpDir(), 'svc.db');
    const db = openDb(fresh);
    expect(db.pragma('page_size', { simple: true })).toBe(PAGE_SIZE);
    expect(PAGE_SIZE).toBe(16384);
    db.close();
    const reopened = openDb(fresh);
    expect(reopened.pragma('page_size', { simple: true })).toBe(PAGE_SIZE);
    reopened.close();

    // an existing store, as SQLite made it by default (4 KiB), with a row in it
    const old = path.join(tmpDir(), 'svc.db');
    const raw = new Database(old);
    expect(raw.pragma('page_size', { simple: true })).toBe(4096);
    raw.pragma('journal_mode = WAL');
    raw.exec('CREATE TABLE kept (n INTEGER)');
    raw.prepare('INSERT INTO kept (n) VALUES (7)').run();
    raw.close();
    const opened = openDb(old);
    try {
      expect(opened.pragma('page_size', { simple: true })).toBe(4096);
      expect(opened.prepare('SELECT n FROM kept').get()).toEqual({ n: 7 });
      expect(opened.pragma('user_version', { simple: true })).toBe(MIGRATIONS.length);
    } finally {
      opened.close();
    }
  });

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

  it(
    'the outbox rebuilt in two b-trees (issue 33) keeps its rows, their batches and its seq: a row inserted after goes on ' +
      'from the last',
    () => {
      const file = path.join(tmpDir(), 'svc.db');
      const old = new Database(file);
      const before = MIGRATIONS.findIndex((m) => m.includes('outbox_rebuilt'));
      expect(before).toBeGreaterThan(0);
      for (const m of MIGRATIONS.slice(0, before)) old.exec(m);
      old.pragma(`user_version = ${before}`);
      const insert = old.prepare(
        "INSERT INTO outbox (event_id, org_id, subject, type, body, route, created_at, batch) VALUES (?, 'org_1', 's', 't', 'b', " +
          "'r', '2026-01-01T00:00:00Z', ?)",
      );
      for (let i = 1; i <= 5; i++) insert.run(`ev_${i}`, i >= 4 ? 'ev_4' : null);
      old.prepare('DELETE FROM outbox WHERE seq <= 3').run(); // published: only the last two wait
      old.close();
      const db = openDb(file);
      try {
        expect(db.prepare('SELECT seq, event_id, batch FROM outbox ORDER BY seq').all()).toEqual([
          { seq: 4, event_id: 'ev_4', batch: 'ev_4' },
          { seq: 5, event_id: 'ev_5', batch: 'ev_4' },
        ]);
        const indexes = (
          db.prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'outbox'").all() as Array<{ name: string }>
        ).map((r) => r.name);
        expect(indexes).toEqual(['outbox_org']); // no autoindex for a UNIQUE, no outbox_unpublished
        db.prepare('DELETE FROM outbox').run();
        const r = db
          .prepare(
            'INSERT INTO outbox (event_id, org_id, subject, type, body, route, created_at) ' +
              "VALUES ('ev_6', 'org_1', 's', 't', 'b', 'r', 'x')",
          )
          .run();
        expect(Number(r.lastInsertRowid)).toBe(6); // not 1: a seq is never used twice
      } finally {
        db.close();
      }
    },
  );

  it('tokens made before scopes are admin (CONTRACT 2): a database of the schema before them, opened', () => {
    const file = path.join(tmpDir(), 'svc.db');
    const old = new Database(file);
    const before = MIGRATIONS.findIndex((m) => m.includes('ADD COLUMN scope'));
    expect(before).toBeGreaterThan(0);
    for (const m of MIGRATIONS.slice(0, before)) old.exec(m);
    old.pragma(`user_version = ${before}`);
    old.prepare("INSERT INTO orgs (org_id, name, created_at) VALUES ('org_old', 'old', '2026-01-01T00:00:00Z')").run();
    old
      .prepare(
        "INSERT INTO api_tokens (token_id, org_id, name, token_hash, created_at) VALUES ('tok_old', 'org_old', 'ci', 'h', " +
          "'2026-01-01T00:00:00Z')",
      )
      .run();
    old.close();
    const db = openDb(file);
    try {
      expect(db.prepare("SELECT scope FROM api_tokens WHERE token_id = 'tok_old'").get()).toEqual({ scope: 'admin' });
    } finally {
      db.close();
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
