// `svc ingest rejections` (CONTRACT 9 "Durable ingest") against a real svc serve: the org's late
// refusals newest first, as a table (producer text made safe for a terminal) or --json; --limit
// reads as many pages as it takes; a bad --limit is a usage error (exit 2) before any request.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDb } from '../../store/db.ts';
import { recordIngestRejections } from '../../store/ingest-rejections.ts';
import { runCli, type CliResult } from '../helpers/cli.ts';
import { startService, type TestService } from '../helpers/service.ts';

const both = (r: CliResult) => `stdout: ${r.stdout}\nstderr: ${r.stderr}`;

describe('svc ingest rejections', () => {
  let svc: TestService;
  let env: Record<string, string>;

  beforeAll(async () => {
    svc = await startService();
    const org = svc.createOrg('cli-rejections');
    const other = svc.createOrg('cli-rejections-other');
    env = { SVC_API_URL: svc.url, SVC_API_TOKEN: org.api_token, SVC_ORG_ID: org.org_id };
    const now = Date.now();
    const row = (orgId: string, n: number, fact: string, error = `refused ${n}`) => ({
      org_id: orgId,
      subject: `svc.ingest.${orgId}.workflows.wf_${n}`,
      received_at: now - 60_000 + n,
      error,
      fact,
    });
    const db = openDb(svc.db);
    db.transaction(() =>
      recordIngestRejections(db, [
        ...Array.from({ length: 600 }, (_, i) => row(org.org_id, i, JSON.stringify({ n: i }))),
        row(other.org_id, 0, '{"other": true}'),
        row(org.org_id, 600, 'not json\u001b[31m red', 'workflow wf_600 belongs to a workflow svc started'),
      ]),
    ).immediate();
    db.close();
  });
  afterAll(async () => {
    await svc?.stop();
  });

  it('lists the newest first as a table, and with --json as the API gives them; --limit pages through', async () => {
    const t = await runCli(['ingest', 'rejections', '--limit', '2'], env);
    expect(t.code, both(t)).toBe(0);
    const lines = t.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^RECEIVED_AT\s+SUBJECT\s+ERROR\s+FACT$/);
    expect(lines).toHaveLength(3);
    expect(lines[1]).toContain('workflow wf_600 belongs to a workflow svc started');
    expect(lines[1]).toContain('not json?[31m red'); // no escape sequence reaches the terminal
    expect(lines[2]).toContain('{"n":599}');

    const j = await runCli(['ingest', 'rejections', '--json'], env);
    expect(j.code, both(j)).toBe(0);
    expect(j.json).toHaveLength(100);
    expect(j.json[0]).toEqual({
      subject: expect.stringMatching(/^svc\.ingest\..*\.workflows\.wf_600$/),
      received_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
      error: 'workflow wf_600 belongs to a workflow svc started',
      fact: 'not json\u001b[31m red',
    });
    expect(j.json[1].fact).toEqual({ n: 599 });

    const all = await runCli(['ingest', 'rejections', '--limit', '1000', '--json'], env);
    expect(all.code, both(all)).toBe(0);
    expect(all.json).toHaveLength(601); // two pages; the other org's row is not among them
    expect(all.json.at(-1).fact).toEqual({ n: 0 });
    const some = await runCli(['ingest', 'rejections', '--limit', '550', '--json'], env);
    expect(some.json).toHaveLength(550);
  });

  it('refuses a bad --limit with exit 2', async () => {
    for (const bad of ['0', 'ten', '10001']) {
      const r = await runCli(['ingest', 'rejections', '--limit', bad], env);
      expect(r.code, both(r)).toBe(2);
      expect(r.stderr).toMatch(/--limit/);
    }
  });
});
