// WAL checkpoints on a thread of their own (store/checkpoints.ts): the engine's commits copy
// nothing back into the database file (no checkpoint in a commit that producers' answers wait for),
// the log still starts again from its beginning under a steady run of commits (its file stays
// bounded), and everything committed is in the database once the engine is closed. On a real file.
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { ProducerFact } from '../../src/engine/engine.ts';
import { openDb } from '../../store/db.ts';
import { EngineWorld } from '../helpers/engine.ts';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const fact = (orgId: string, id: string): ProducerFact => ({
  family: 'workflows',
  orgId,
  id,
  body: { kind: 'workflow', transition: 'started', workflow: { id, type: 'manual_deploy', owner_id: 'inst_x', owner_type: 'installs' } },
});

describe('WAL checkpoints', () => {
  it("are not made in the engine's commits, yet the log stays bounded under a steady run of group commits", {
    timeout: 60_000,
  }, async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'svc-ckpt-'));
    dirs.push(dir);
    const file = path.join(dir, 'svc.db');
    const w = new EngineWorld({ dbFile: file });
    expect(w.db.pragma('wal_autocheckpoint', { simple: true })).toBe(0);
    const O = w.org();
    const GROUPS = 100;
    const SIZE = 100;
    let walMax = 0;
    for (let g = 0; g < GROUPS; g++) {
      const results = w.engine.ingest(Array.from({ length: SIZE }, (_, i) => fact(O, `wfx_${g}_${i}`)));
      expect(results.every((r) => r.ok)).toBe(true);
      // a turn of the event loop between groups, as ingest has
      await new Promise<void>((r) => setImmediate(r));
      walMax = Math.max(walMax, statSync(`${file}-wal`).size);
    }
    // without a checkpoint the log would hold every commit (~5 KB a fact: ~50 MB); it starts again
    // once the thread has copied it and it passed 16 MiB (RESTART_BYTES). The engine looks at the file
    // after each group, so it peaks at 18 MB here whether the thread's passes come every 50 ms or
    // later (when only the thread's passes told it: 18–27 MB, and 30.9 MB once in CI)
    expect(walMax).toBeLessThan(26_000_000);
    w.close();
    // at the close, the whole log is copied into the database file and emptied
    expect(existsSync(`${file}-wal`) ? statSync(`${file}-wal`).size : 0).toBe(0);
    const db = openDb(file);
    expect(db.prepare('SELECT count(*) AS n FROM workflows WHERE org_id = ?').get(O)).toEqual({ n: GROUPS * SIZE });
    db.close();
  });

  it('are left to SQLite for a store in memory', () => {
    const w = new EngineWorld();
    expect(w.db.pragma('wal_autocheckpoint', { simple: true })).toBe(1000);
    w.close();
  });
});
