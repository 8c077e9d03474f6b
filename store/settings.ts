// Small named values of the installation (e.g. the data plane key when no credentials file gives one).
import type { Db } from './db.ts';

export function getSetting(db: Db, key: string): string | undefined {
  return (db.prepare('SELECT value FROM settings WHERE key = ?').get(key) as { value: string } | undefined)?.value;
}

/** Set a value unless one is there; returns the value that is stored (the first writer wins). */
export function setSettingOnce(db: Db, key: string, value: string): string {
  db.prepare('INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING').run(key, value);
  return getSetting(db, key)!;
}

export function setSetting(db: Db, key: string, value: string): void {
  db.prepare('INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value').run(key, value);
}

/** The webhook registry's version (src/handoff/registry-replicator.ts): every webhook change bumps it. */
export const REGISTRY_VERSION_SETTING = 'registry_version';
