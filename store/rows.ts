// One row read and decoded: the shape of the store's getters by id (installs, components, actions, runners).
import type { Db } from './db.ts';

/** The row `sql` finds with `params`, decoded; undefined when there is none. */
// biome-ignore lint/suspicious/noExplicitAny: a SQLite row, decoded into its typed shape by `decode`
export function oneRow<T>(db: Db, sql: string, decode: (r: any) => T, ...params: unknown[]): T | undefined {
  const r = db.prepare(sql).get(...params);
  return r ? decode(r) : undefined;
}
