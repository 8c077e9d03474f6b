// A change without its audit row must be impossible (CONTRACT 2; ARCHITECTURE: the engine's
// transaction records who made the change): `svc serve` as a child process takes a stream of
// writes from several tokens (webhook creates and PATCHes, app creates) and is killed with SIGKILL
// in the middle of them. On the file it leaves: every webhook and app has its create row, every
// successful create row has its resource, every acknowledged write (a 2xx the client read) has its
// row, and the PATCHed secrets match exactly the 200 PATCH rows. A restart on the file serves the
// same log.
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { children, spawnService } from '../helpers/child-service.ts';
import { apiClient, newDbWithOrg, waitFor } from '../helpers/service.ts';
import { openDb } from '../../store/db.ts';
import { createToken } from '../../store/orgs.ts';

type Json = any;

afterAll(() => {
  for (const c of children) c.kill('SIGKILL');
});

describe('kill -9 in the middle of writes', () => {
  it('leaves no change without its audit row and no row without its change', { timeout: 90_000 }, async () => {
    const { db, org } = newDbWithOrg('audit-crash');
    const h = openDb(db);
    const hooks = { org_id: org.org_id, ...createToken(h, org.org_id, 'hooks', 'webhooks') };
    const deploy = { org_id: org.org_id, ...createToken(h, org.org_id, 'deploy', 'deploy') };
    h.close();
    const child = await spawnService(db);
    const H = apiClient(child.url, hooks);
    const D = apiClient(child.url, deploy);

    const acked: Array<{ action: string; id: string; status: number }> = [];
    let stop = false;
    let n = 0;
    // writers keep going until the process dies under them
    const writer = async (k: number) => {
      while (!stop) {
        const i = n++;
        try {
          if (k % 3 === 2) {
            const r = await D.post('/v1/apps', { name: `app-${i}` });
            if (r.status === 201) acked.push({ action: 'apps.create', id: r.body.app_id, status: 201 });
          } else {
            const r = await H.post('/v1/orgs/current/webhooks', { webhook_url: `http://127.0.0.1:9/h/${i}`, secret: `s-${i}` });
            if (r.status !== 201) continue;
            acked.push({ action: 'webhooks.create', id: r.body.webhook_id, status: 201 });
            const p = await H.patch(`/v1/orgs/current/webhooks/${r.body.webhook_id}`, { secret: `rotated-${i}` });
            if (p.status === 200) acked.push({ action: 'webhooks.update', id: r.body.webhook_id, status: 200 });
          }
        } catch {
          return; // the connection died with the process
        }
      }
    };
    const writers = Array.from({ length: 12 }, (_, k) => writer(k));
    await waitFor(() => acked.length >= 150, 30_000, '150 acknowledged writes');
    child.proc.kill('SIGKILL');
    await child.exited;
    stop = true;
    await Promise.all(writers);

    const store = new Database(db, { readonly: true });
    try {
      const audit = store.prepare('SELECT action, resource_id, status, token_id FROM audit_log WHERE org_id = ?').all(org.org_id) as Json[];
      const webhooks = store.prepare('SELECT webhook_id, secret FROM webhooks WHERE org_id = ?').all(org.org_id) as Json[];
      const apps = store.prepare('SELECT app_id FROM apps WHERE org_id = ?').all(org.org_id) as Json[];
      const ok = (action: string) =>
        new Set(audit.filter((a) => a.action === action && a.status >= 200 && a.status < 300).map((a) => a.resource_id));

      // every change has its row, every row its change
      expect(new Set(webhooks.map((w) => w.webhook_id))).toEqual(ok('webhooks.create'));
      expect(new Set(apps.map((a) => a.app_id))).toEqual(ok('apps.create'));
      const rotated = new Set(webhooks.filter((w) => String(w.secret).startsWith('rotated-')).map((w) => w.webhook_id));
      expect(rotated).toEqual(ok('webhooks.update'));
      // every write a client was answered for is there, with its actor
      for (const a of acked) {
        expect(audit, `${a.action} ${a.id}`).toContainEqual(
          expect.objectContaining({ action: a.action, resource_id: a.id, status: a.status }),
        );
      }
      expect(audit.filter((a) => a.action === 'apps.create').every((a) => a.token_id === deploy.token_id)).toBe(true);
      expect(audit.filter((a) => a.action.startsWith('webhooks.')).every((a) => a.token_id === hooks.token_id)).toBe(true);
      expect(acked.length).toBeGreaterThanOrEqual(150);
      // no secret in the log
      expect(JSON.stringify(audit)).not.toMatch(/rotated-|"s-\d/);
    } finally {
      store.close();
    }

    // a restart on the file serves the same log
    const again = await spawnService(db);
    try {
      const admin = apiClient(again.url, org);
      let count = 0;
      let after: string | null = null;
      do {
        const r: { status: number; body: Json } = await admin.get(`/v1/audit?limit=500${after ? `&after=${after}` : ''}`);
        expect(r.status).toBe(200);
        count += r.body.data.length;
        after = r.body.next_cursor;
      } while (after);
      const store2 = new Database(db, { readonly: true });
      expect(count).toBe((store2.prepare('SELECT COUNT(*) AS n FROM audit_log WHERE org_id = ?').get(org.org_id) as { n: number }).n);
      store2.close();
    } finally {
      again.proc.kill('SIGTERM');
      await again.exited;
    }
  });
});
