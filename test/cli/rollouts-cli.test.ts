// `svc apps rollback …` and `svc configs veto|unveto …` (CONTRACT 7) against a real svc: the plan is
// printed before anything is applied, a vetoed config is refused with the server's message, usage
// errors exit 2 before any request.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli as cli } from '../helpers/cli.ts';
import { startService, type ApiClient, type TestService } from '../helpers/service.ts';
import { get, post, waitWf } from '../helpers/workflows.ts';
import { rid } from '../helpers/ids.ts';

type Json = any;

let svc: TestService;
let api: ApiClient;
let env: Record<string, string>;

beforeAll(async () => {
  svc = await startService();
  const org = svc.createOrg('cli-rollouts');
  api = svc.api(org);
  env = { SVC_API_URL: svc.url, SVC_API_TOKEN: org.api_token, SVC_ORG_ID: org.org_id };
}, 30_000);
afterAll(async () => {
  await svc?.stop();
});

const cfg = (image: string) => ({ components: [{ name: 'api', values: { image } }] });

describe('svc apps rollback, svc configs veto|unveto', () => {
  it('veto, a refused rollback (exit 1, the reason), unveto, a plan-only rollback, then --yes --no-approval --bake: plan first, ' +
    'the run after', {
    timeout: 60_000,
  }, async () => {
    const app = await post(api, '/v1/apps', { name: rid('shop') });
    const v1 = await post(api, `/v1/apps/${app.app_id}/configs`, cfg('api:1'));
    const v2 = await post(api, `/v1/apps/${app.app_id}/configs`, cfg('api:2'));
    const inst = await post(api, '/v1/installs', {
      app_id: app.app_id,
      name: rid('eu'),
      labels: { ring: 'canary' },
      app_config_id: v1.app_config_id,
    });
    const [prov] = await get(api, `/v1/installs/${inst.install_id}/workflows`);
    await waitWf(api, prov.workflow_id);
    const up = await post(api, `/v1/installs/${inst.install_id}/app-config-updates`, { app_config_id: v2.app_config_id });
    await waitWf(api, up.workflow_id);
    const lone = await post(api, '/v1/installs', {
      app_id: app.app_id,
      name: rid('us'),
      labels: { ring: 'main' },
      app_config_id: v2.app_config_id,
    });

    const vetoed = await cli(['configs', 'veto', app.app_id, v1.app_config_id, '--reason', 'api:1 is broken'], env);
    expect(vetoed.code, vetoed.stderr).toBe(0);
    expect(vetoed.stdout).toMatch(/vetoed:\s+api:1 is broken \(since /);

    const plan = await cli(['apps', 'rollback', app.app_id, '--plan-only'], env);
    expect(plan.code, plan.stderr).toBe(0);
    expect(plan.stdout).toContain(
      `group other:\n  install ${inst.name} (${inst.install_id}): ${v2.app_config_id} -> ${v1.app_config_id} VETOED: api:1 is broken`,
    );
    expect(plan.stdout).toContain('~ values.image: "api:2" -> "api:1"');
    expect(plan.stdout).toContain(`skipped ${lone.install_id}: no earlier version`);
    expect(plan.stdout).toContain('plan only: nothing was applied');

    const refused = await cli(['apps', 'rollback', app.app_id, '--yes'], env);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('api:1 is broken');
    expect((await get(api, `/v1/installs/${inst.install_id}`)).app_config_id).toBe(v2.app_config_id);

    const lifted = await cli(['configs', 'unveto', app.app_id, v1.app_config_id, '--json'], env);
    expect(lifted.code, lifted.stderr).toBe(0);
    expect(lifted.json).toMatchObject({ app_config_id: v1.app_config_id, vetoed: null });

    const applied = await cli(
      [
        'apps',
        'rollback',
        app.app_id,
        '--to',
        'previous',
        '--selector',
        'ring=canary',
        '--yes',
        '--no-approval',
        '--bake',
        '0s',
        '--on-bad',
        'rollback',
        '--gate-for',
        '1s',
        '--max-parallel',
        '1',
        '--failure-budget',
        '50%',
        '--on-failure',
        'halt',
      ],
      env,
    );
    expect(applied.code, applied.stderr).toBe(0);
    const planAt = applied.stdout.indexOf(`install ${inst.name}`);
    const runAt = applied.stdout.indexOf('workflow_id');
    expect(planAt).toBeGreaterThanOrEqual(0);
    expect(runAt).toBeGreaterThan(planAt);
    const wfId = /workflow_id:\s+(\S+)/.exec(applied.stdout)![1];
    const wf: Json = await waitWf(api, wfId);
    expect(wf).toMatchObject({ type: 'app_rollback', status: 'succeeded' });
    expect(wf.steps.map((s: Json) => s.name)).toEqual(['deploy install group: other', 'bake install group: other']);
    expect((await get(api, `/v1/installs/${inst.install_id}`)).app_config_id).toBe(v1.app_config_id);
  });

  it(
    'usage errors exit 2 before any request: --on-bad or --gate-for without --bake, --on-bad not halt|rollback, --gate-for not ' +
      '0s–1h, a bad --selector, applying without a terminal or --yes',
    async () => {
      for (const args of [
        ['apps', 'rollback', 'app_1', '--on-bad', 'rollback', '--yes'],
        ['apps', 'rollback', 'app_1', '--bake', '1m', '--on-bad', 'explode', '--yes'],
        ['apps', 'rollback', 'app_1', '--gate-for', '3s', '--yes'],
        ['apps', 'rollback', 'app_1', '--bake', '1m', '--gate-for', '2h', '--yes'],
        ['branches', 'run', 'app_1', 'br_1', '--app-config', 'cfg_1', '--bake', '1m', '--gate-for', 'soon'],
        ['branches', 'run', 'app_1', 'br_1', '--app-config', 'cfg_1', '--on-bad', 'rollback'],
        ['branches', 'run', 'app_1', 'br_1', '--app-config', 'cfg_1', '--max-parallel', '0'],
        ['apps', 'rollback', 'app_1', '--failure-budget', '120', '--yes'],
        ['apps', 'rollback', 'app_1', '--on-failure', 'panic', '--yes'],
        ['apps', 'rollback', 'app_1', '--selector', 'nolabel', '--yes'],
        ['apps', 'rollback', 'app_1'],
        ['configs', 'veto', 'app_1', 'cfg_1'],
      ]) {
        const r = await cli(args, { ...env, SVC_API_URL: 'http://127.0.0.1:1' });
        expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(2);
      }
    },
  );
});
