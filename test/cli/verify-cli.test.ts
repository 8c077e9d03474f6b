// `--verify URL` of `svc branches run` and `svc apps rollback` (CONTRACT 4.3 `verification`, 7)
// against a real svc and a real receiver playing the verification URLs: each URL becomes a
// verification gate (asked after each group's deploy); a URL that is not http(s), or more than 5,
// is a usage error (exit 2) before any request.
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli as cli } from '../helpers/cli.ts';
import { startReceiver, type Receiver } from '../helpers/receiver.ts';
import { startService, waitFor, type ApiClient, type TestService } from '../helpers/service.ts';
import { appWithThreeConfigs, get, installWith, post, waitStep, waitWf } from '../helpers/workflows.ts';
import { rid } from '../helpers/ids.ts';

type Json = any;

let svc: TestService;
let rcv: Receiver;
let api: ApiClient;
let env: Record<string, string>;

beforeAll(async () => {
  svc = await startService();
  rcv = await startReceiver();
  const org = svc.createOrg('cli-verify');
  api = svc.api(org);
  env = { SVC_API_URL: svc.url, SVC_API_TOKEN: org.api_token, SVC_ORG_ID: org.org_id };
}, 30_000);
afterAll(async () => {
  await svc?.stop();
  await rcv?.close();
});

const cfg = (image: string) => ({ components: [{ name: 'api', values: { image } }] });

describe('svc branches run / svc apps rollback --verify', () => {
  it('branches run --verify A --verify B: both URLs are asked after the deploy; the run succeeds once both pass. apps rollback ' +
    '--verify: the same', {
    timeout: 60_000,
  }, async () => {
    const { app, v1, v2 } = await appWithThreeConfigs(api, rid('shop'), cfg);
    const inst = await installWith(api, rid('eu'), app.app_id, v1.app_config_id, { ring: 'canary' });
    const branch = await post(api, `/v1/apps/${app.app_id}/branches`, {
      name: 'main',
      install_groups: [{ name: 'canary', install_ids: [inst.install_id] }],
    });
    for (const name of ['cli-a', 'cli-b', 'cli-rb']) rcv.set(name, { answer: () => ({ status: 200, body: '{"verdict":"pass"}' }) });

    const r = await cli(
      [
        'branches',
        'run',
        app.app_id,
        branch.app_branch_id,
        '--app-config',
        v2.app_config_id,
        '--skip-builds',
        '--verify',
        rcv.hook('cli-a'),
        '--verify',
        rcv.hook('cli-b'),
        '--json',
      ],
      env,
    );
    expect(r.code, r.stderr).toBe(0);
    const W = JSON.parse(r.stdout).workflow_id;
    const { step } = await waitStep(api, W, 'plan install group: canary', 'awaiting_approval');
    await post(api, `/v1/workflows/${W}/steps/${step.step_id}/approval`, { response: 'approved' }, 200);
    const done = await waitWf(api, W);
    expect(done.status).toBe('succeeded');
    expect(done.steps.map((s: Json) => s.name)).toContain('verify install group: canary');
    expect(rcv.at('cli-a')).toHaveLength(1);
    expect(rcv.at('cli-b')).toHaveLength(1);
    expect(rcv.at('cli-a')[0].json).toMatchObject({
      type: 'com.svc.rollout.verification.v1',
      data: { rollout: { run_id: W, group: 'canary', attempt: 1 } },
    });

    const secret = 'whsec_ZGVtby1zZWNyZXQ=';
    const rb = await cli(
      [
        'apps',
        'rollback',
        app.app_id,
        '--to',
        v1.app_config_id,
        '--yes',
        '--no-approval',
        '--verify',
        rcv.hook('cli-rb'),
        '--verify-secret',
        secret,
        '--json',
      ],
      env,
    );
    expect(rb.code, rb.stderr).toBe(0);
    const rbW: string | undefined = JSON.parse(rb.stdout).workflow_id;
    expect(rbW).toBeTruthy();
    expect((await waitWf(api, rbW!)).status).toBe('succeeded');
    await waitFor(() => rcv.at('cli-rb').length === 1, 5000, 'the rollback verification request');
    expect(rcv.at('cli-rb')[0].json.data.workflow).toMatchObject({ id: rbW, type: 'app_rollback' });
    // --verify-secret: signed as a delivery, checked with the stock library; the secret is shown nowhere
    const signed = rcv.at('cli-rb')[0];
    expect(() => new Webhook(secret).verify(signed.raw, signed.headers as Record<string, string>)).not.toThrow();
    expect(rcv.at('cli-a')[0].headers['webhook-signature']).toBeUndefined();
    expect(JSON.stringify(await get(api, `/v1/workflows/${rbW}`))).not.toContain('ZGVtby1zZWNyZXQ');
    expect((await get(api, `/v1/installs/${inst.install_id}`)).app_config_id).toBe(v1.app_config_id);
  });

  it('usage errors exit 2 before any request: --verify not an http(s) URL, more than 5', async () => {
    const six = Array.from({ length: 6 }, (_, i) => ['--verify', `https://v${i}.example/check`]).flat();
    for (const args of [
      ['branches', 'run', 'app_1', 'br_1', '--app-config', 'cfg_1', '--verify', 'ftp://example.com/x'],
      ['branches', 'run', 'app_1', 'br_1', '--app-config', 'cfg_1', '--verify', 'not a url'],
      ['apps', 'rollback', 'app_1', '--yes', ...six],
      ['apps', 'rollback', 'app_1', '--yes', '--verify-secret', 'whsec_ZGVtby1zZWNyZXQ='],
    ]) {
      const r = await cli(args, { ...env, SVC_API_URL: 'http://127.0.0.1:1' });
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(2);
      expect(r.stderr).toContain('--verify');
    }
  });
});
