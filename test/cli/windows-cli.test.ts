// `svc apps windows list|create|delete APP …` (CONTRACT 7, new in 0.2) against a real svc: a window
// made from flags reaches the API as given, shows in the list, goes with delete; usage errors exit 2
// before any request; the server's refusal exits 1 with its message.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli as cli } from '../helpers/cli.ts';
import { startService, type ApiClient, type TestService } from '../helpers/service.ts';
import { get, post, waitWf } from '../helpers/workflows.ts';
import { rid } from '../helpers/ids.ts';

let svc: TestService;
let api: ApiClient;
let env: Record<string, string>;

beforeAll(async () => {
  svc = await startService();
  const org = svc.createOrg('cli-windows');
  api = svc.api(org);
  env = { SVC_API_URL: svc.url, SVC_API_TOKEN: org.api_token, SVC_ORG_ID: org.org_id };
}, 30_000);
afterAll(async () => {
  await svc?.stop();
});

describe('svc apps windows', () => {
  it('create (every flag), list, a plan that waits for it, delete; bad flags exit 2, a bad time zone exits 1 with the reason', {
    timeout: 60_000,
  }, async () => {
    const app = await post(api, '/v1/apps', { name: rid('shop') });
    const v1 = await post(api, `/v1/apps/${app.app_id}/configs`, { components: [{ name: 'api', values: { image: 'api:1' } }] });
    const v2 = await post(api, `/v1/apps/${app.app_id}/configs`, { components: [{ name: 'api', values: { image: 'api:2' } }] });
    const inst = await post(api, '/v1/installs', {
      app_id: app.app_id,
      name: rid('acme'),
      labels: { tier: 'enterprise' },
      app_config_id: v1.app_config_id,
    });
    const [prov] = await get(api, `/v1/installs/${inst.install_id}/workflows`);
    await waitWf(api, prov.workflow_id);
    await waitWf(
      api,
      (await post(api, `/v1/installs/${inst.install_id}/app-config-updates`, { app_config_id: v2.app_config_id })).workflow_id,
    );

    const made = await cli(
      [
        'apps',
        'windows',
        'create',
        app.app_id,
        '--name',
        'freeze',
        '--kind',
        'deny',
        '--days',
        'mon,tue,wed,thu,fri,sat,sun',
        '--start',
        '00:00',
        '--duration',
        '24h',
        '--time-zone',
        'America/Los_Angeles',
        '--selector',
        'tier=enterprise',
        '--install',
        inst.install_id,
        '--applies-to',
        'branch_run,rollback',
        '--json',
      ],
      env,
    );
    expect(made.code, made.stderr).toBe(0);
    expect(made.json).toMatchObject({
      name: 'freeze',
      kind: 'deny',
      days: ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'],
      start: '00:00',
      duration: '24h',
      time_zone: 'America/Los_Angeles',
      install_ids: [inst.install_id],
      selector: { match_labels: { tier: 'enterprise' } },
      applies_to: ['branch_run', 'rollback'],
    });
    const id = made.json.window_id;

    const listed = await cli(['apps', 'windows', 'list', app.app_id], env);
    expect(listed.code, listed.stderr).toBe(0);
    expect(listed.stdout).toMatch(
      new RegExp(`${id}\\s+freeze\\s+deny\\s+mon,tue,wed,thu,fri,sat,sun\\s+00:00\\s+24h\\s+America/Los_Angeles`),
    );

    // a rollback's plan says it waits for the window, by name and id
    const plan = await cli(['apps', 'rollback', app.app_id, '--plan-only'], env);
    expect(plan.code, plan.stderr).toBe(0);
    expect(plan.stdout).toContain(`waits for change window freeze (${id}): starts `);

    for (const bad of [
      ['--kind', 'maybe'],
      ['--days', 'someday'],
      ['--start', '7pm'],
      ['--applies-to', 'everything'],
    ]) {
      const args = { '--kind': 'deny', '--days': 'mon', '--start': '01:00', ...Object.fromEntries([bad]) } as Record<string, string>;
      const r = await cli(
        ['apps', 'windows', 'create', app.app_id, '--name', 'x', '--duration', '1h', '--time-zone', 'UTC', ...Object.entries(args).flat()],
        env,
      );
      expect(r.code, `${bad.join(' ')}: ${r.stderr}`).toBe(2);
      expect(r.stderr).toContain(bad[0]);
    }
    const refused = await cli(
      [
        'apps',
        'windows',
        'create',
        app.app_id,
        '--name',
        'x',
        '--kind',
        'allow',
        '--days',
        'mon',
        '--start',
        '01:00',
        '--duration',
        '1h',
        '--time-zone',
        'Mars/Olympus',
      ],
      env,
    );
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('time_zone');
    expect((await get(api, `/v1/apps/${app.app_id}/change-windows`)).length).toBe(1);

    const gone = await cli(['apps', 'windows', 'delete', app.app_id, id], env);
    expect(gone.code, gone.stderr).toBe(0);
    expect(gone.stdout).toContain(`deleted change window ${id}`);
    expect(await get(api, `/v1/apps/${app.app_id}/change-windows`)).toEqual([]);
    const again = await cli(['apps', 'windows', 'delete', app.app_id, id], env);
    expect(again.code).toBe(1);
  });
});
