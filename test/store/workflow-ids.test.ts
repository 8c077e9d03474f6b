// store/workflows.ts: a producer's workflow id names the workflow stored under it (found by the
// primary key), or the org's workflow stored under an id of its own because that id was another
// org's (found through the index on (org, external id), which holds only those). A new workflow
// stored under its own id writes one id index, not two copies of the same key (issue 33).
import path from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { openDb, type Db } from '../../store/db.ts';
import { MIGRATIONS } from '../../store/migrations.ts';
import { findOrgWorkflow, insertWorkflow, lookupReportedWorkflow, type WorkflowFields } from '../../store/workflows.ts';
import { tmpDir } from '../helpers/service.ts';
import { tempStores } from '../helpers/store.ts';

const stores = tempStores('svc-workflow-ids-');

function org(db: Db, id: string): string {
  db.prepare('INSERT INTO orgs (org_id, name, created_at) VALUES (?, ?, ?)').run(id, id, '2026-01-01T00:00:00Z');
  return id;
}

const reported = (orgId: string, storedAs: string, externalId: string | null): WorkflowFields => ({
  workflow_id: storedAs,
  org_id: orgId,
  type: 'provision',
  owner_id: 'inst_1',
  owner_type: 'installs',
  parent: null,
  action_id: null,
  external: externalId !== null,
  external_id: externalId,
  status: 'started',
  error: null,
  params: {},
  started_at: null,
  finished_at: null,
});

const plan = (db: Db, sql: string, ...args: unknown[]): string =>
  (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...args) as Array<{ detail: string }>).map((r) => r.detail).join(' | ');

describe('workflow ids a producer reports', () => {
  it(
    "names the workflow stored under the id, or the org's own stored under another id; a third org finds neither but learns the " +
      'id is taken',
    () => {
      const db = stores.open();
      const [A, B, C] = [org(db, 'org_a'), org(db, 'org_b'), org(db, 'org_c')];
      insertWorkflow(db, reported(A, 'bwf_same', 'bwf_same'));
      insertWorkflow(db, reported(B, 'wf_b_own', 'bwf_same'));
      insertWorkflow(db, reported(A, 'wf_engine', null)); // the engine's own: no external id

      expect(findOrgWorkflow(db, A, 'bwf_same')?.workflow_id).toBe('bwf_same');
      expect(findOrgWorkflow(db, B, 'bwf_same')?.workflow_id).toBe('wf_b_own');
      expect(findOrgWorkflow(db, C, 'bwf_same')).toBeUndefined();
      // the id it is stored under names it too, in its own org only
      expect(findOrgWorkflow(db, B, 'wf_b_own')?.workflow_id).toBe('wf_b_own');
      expect(findOrgWorkflow(db, A, 'wf_engine')?.workflow_id).toBe('wf_engine');
      expect(findOrgWorkflow(db, B, 'wf_engine')).toBeUndefined();

      expect(lookupReportedWorkflow(db, A, 'bwf_same')).toMatchObject({ workflow: { workflow_id: 'bwf_same', org_id: A }, idTaken: true });
      expect(lookupReportedWorkflow(db, B, 'bwf_same')).toMatchObject({ workflow: { workflow_id: 'wf_b_own', org_id: B }, idTaken: true });
      expect(lookupReportedWorkflow(db, C, 'bwf_same')).toEqual({ workflow: undefined, idTaken: true });
      expect(lookupReportedWorkflow(db, C, 'bwf_other')).toEqual({ workflow: undefined, idTaken: false });
      expect(lookupReportedWorkflow(db, A, 'wf_engine')).toMatchObject({
        workflow: { workflow_id: 'wf_engine', external: false },
        idTaken: true,
      });
    },
  );

  it("an org's workflow reported under an id wins over one stored under that id (the id it reported is what the outside knows)", () => {
    const db = stores.open();
    const A = org(db, 'org_a');
    org(db, 'org_b');
    // A's engine runs wf_x; later a producer of A reports wf_x (refused by the engine, yet the store's answer is fixed)
    insertWorkflow(db, reported(A, 'wf_x', null));
    insertWorkflow(db, reported(A, 'wf_a_own', 'wf_x'));
    expect(findOrgWorkflow(db, A, 'wf_x')?.workflow_id).toBe('wf_a_own');
    expect(lookupReportedWorkflow(db, A, 'wf_x')).toMatchObject({ workflow: { workflow_id: 'wf_a_own' }, idTaken: true });
  });

  it('an org reports an id once: a second workflow of the org under the same reported id is refused', () => {
    const db = stores.open();
    const B = org(db, 'org_b');
    insertWorkflow(db, reported(B, 'wf_1', 'bwf_same'));
    expect(() => insertWorkflow(db, reported(B, 'wf_2', 'bwf_same'))).toThrow(/UNIQUE/);
    // stored under the id itself: the primary key refuses a second
    insertWorkflow(db, reported(B, 'bwf_own', 'bwf_own'));
    expect(() => insertWorkflow(db, reported(B, 'bwf_own', 'bwf_own'))).toThrow(/UNIQUE/);
  });

  it("each lookup is one index search, not a scan of the org's workflows", () => {
    const db = stores.open();
    expect(plan(db, 'SELECT * FROM workflows WHERE workflow_id = ?', 'x')).toMatch(
      /SEARCH workflows USING INDEX sqlite_autoindex_workflows_1 \(workflow_id=\?\)/,
    );
    expect(plan(db, 'SELECT * FROM workflows WHERE org_id = ? AND external_id = ? AND external_id <> workflow_id', 'o', 'x')).toMatch(
      /SEARCH workflows USING INDEX workflows_external_id_renamed \(org_id=\? AND external_id=\?\)/,
    );
    // the index holds only workflows stored under an id of their own
    const A = org(db, 'org_a');
    for (let i = 0; i < 5; i++) insertWorkflow(db, reported(A, `bwf_${i}`, `bwf_${i}`));
    insertWorkflow(db, reported(A, 'wf_own', 'bwf_taken'));
    expect(
      db
        .prepare(
          'SELECT count(*) AS n FROM workflows INDEXED BY workflows_external_id_renamed ' +
            'WHERE org_id = ? AND external_id IS NOT NULL AND external_id <> workflow_id',
        )
        .get(A),
    ).toEqual({ n: 1 });
  });

  it('a database of the schema before: its workflows are found as before, and the index on every external id is gone', () => {
    const file = path.join(tmpDir('svc-workflow-ids-old-'), 'svc.db');
    const old = new Database(file);
    const before = MIGRATIONS.findIndex((m) => m.includes('workflows_external_id_renamed'));
    expect(before).toBeGreaterThan(0);
    for (const m of MIGRATIONS.slice(0, before)) old.exec(m);
    old.pragma(`user_version = ${before}`);
    const raw = (a: WorkflowFields) =>
      old
        .prepare(
          'INSERT INTO workflows (workflow_id, org_id, type, owner_id, owner_type, external, external_id, status, created_at) ' +
            "VALUES (?, ?, 'provision', 'inst_1', 'installs', ?, ?, 'started', '2026-01-01T00:00:00Z')",
        )
        .run(a.workflow_id, a.org_id, a.external ? 1 : 0, a.external_id);
    old.prepare("INSERT INTO orgs (org_id, name, created_at) VALUES ('org_a', 'a', 'x'), ('org_b', 'b', 'x')").run();
    raw(reported('org_a', 'bwf_same', 'bwf_same'));
    raw(reported('org_b', 'wf_b_own', 'bwf_same'));
    old.close();
    const db = stores.closeAfter(openDb(file));
    expect(findOrgWorkflow(db, 'org_a', 'bwf_same')?.workflow_id).toBe('bwf_same');
    expect(findOrgWorkflow(db, 'org_b', 'bwf_same')?.workflow_id).toBe('wf_b_own');
    const indexes = (
      db
        .prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'workflows' AND name LIKE 'workflows_external%'")
        .all() as Array<{ name: string }>
    ).map((r) => r.name);
    expect(indexes).toEqual(['workflows_external_id_renamed']);
    expect(() => insertWorkflow(db, reported('org_b', 'wf_b_two', 'bwf_same'))).toThrow(/UNIQUE/);
  });
});
