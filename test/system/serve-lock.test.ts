// One `svc serve` per database (CONTRACT 1): a second `svc serve` on a database a running one holds
// (another port, another path to the same file) exits 1 naming the holder, before it changes
// anything; the database commands work beside the holder; a holder killed with kill -9 does not
// block the next start (the lock is the kernel's and goes with the process).
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { children, spawnService } from '../helpers/child-service.ts';
import { runCliProcess } from '../helpers/cli.ts';
import { newDbWithOrg, tmpDir } from '../helpers/service.ts';
import { lockStore, StoreInUseError } from '../../store/lock.ts';

afterAll(() => {
  for (const c of children) c.kill('SIGKILL');
});

describe('svc serve holds its database', () => {
  it('a second serve on the same file exits 1 naming the holder; orgs create works beside it; after kill -9 a new one listens at once', async () => {
    const { db } = newDbWithOrg('lock');
    const first = await spawnService(db);
    const since = Date.now();

    // another port, the in-process bus: refused, exit 1, the message names the holder's pid
    const second = await runCliProcess(['serve', '--port', '0', '--db', db, '--drift-interval', 'off']);
    expect(second.code).toBe(1);
    expect(second.stdout).not.toContain('listening on');
    const m = new RegExp(`^error: ${db.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} is in use by svc serve \\(pid (\\d+), since ([^)]+)\\)\\n$`).exec(second.stderr);
    expect(m, second.stderr).not.toBeNull();
    expect(Number(m![1])).toBe(first.proc.pid);
    expect(Math.abs(Date.parse(m![2]) - since)).toBeLessThan(30_000);

    // the same file by another path (a symlinked directory): the same lock
    const link = path.join(tmpDir('svc-lock-link-'), 'dir');
    fs.symlinkSync(path.dirname(db), link);
    const viaLink = await runCliProcess(['serve', '--port', '0', '--db', path.join(link, 'svc.db'), '--drift-interval', 'off']);
    expect(viaLink.code).toBe(1);
    expect(viaLink.stderr).toContain(`is in use by svc serve (pid ${first.proc.pid},`);

    // the database commands work beside the holder
    const org = await runCliProcess(['orgs', 'create', '--name', 'beside', '--db', db]);
    expect(org.code).toBe(0);
    expect(org.json.org_id).toMatch(/^[a-z0-9_]+$/);
    const token = await runCliProcess(['tokens', 'create', '--org', org.json.org_id, '--db', db]);
    expect(token.code).toBe(0);
    expect((await fetch(`${first.url}/v1/orgs/current/webhooks`, { headers: { authorization: `Bearer ${token.json.api_token}`, 'x-svc-org-id': org.json.org_id } })).status).toBe(200);

    // kill -9: the next start is not blocked
    first.proc.kill('SIGKILL');
    await first.exited;
    const killedAt = Date.now();
    const third = await spawnService(db);
    expect(Date.now() - killedAt).toBeLessThan(15_000);
    expect((await fetch(`${third.url}/healthz`)).status).toBe(200);
    third.proc.kill('SIGTERM');
    expect((await third.exited).code).toBe(0);
    // and after a clean stop, too
    const fourth = await spawnService(db);
    fourth.proc.kill('SIGTERM');
    expect((await fourth.exited).code).toBe(0);
  }, 90_000);

  it('in process: a held lock refuses a second take with the holder, and is free again once released', () => {
    const db = path.join(tmpDir('svc-lock-'), 'svc.db');
    const held = lockStore(db);
    let refused: unknown;
    try {
      lockStore(db);
    } catch (err) {
      refused = err;
    }
    expect(refused).toBeInstanceOf(StoreInUseError);
    expect((refused as StoreInUseError).holder?.pid).toBe(process.pid);
    expect(fs.existsSync(db)).toBe(false); // the database itself is not touched
    held.release();
    lockStore(db).release();
  });
});
