// The CLI's rough edges of issue 32 (CONTRACT 7 "New in 0.2"), each against real things: a closed
// pipe ends quietly (the real binary through a shell pipe into `head`), `installs diff` by version
// number, `GET /v1/apps` and `svc apps list`, each error message said once, `--bake` checked as a
// usage error, `nats creds` only for an org that exists, `nats init` warning about a git checkout.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli as cli, runCliProcess, type CliResult } from '../helpers/cli.ts';
import { BIN, ROOT } from '../helpers/paths.ts';
import { startService, tmpDir, type OrgCreds, type TestService } from '../helpers/service.ts';

const both = (r: CliResult) => `${r.stdout}\n${r.stderr}`;

/** An HTTP server answering GET paths from `routes` (404 otherwise), recording what was asked. */
async function fakeApi(routes: Record<string, unknown>) {
  const asked: string[] = [];
  const server = http.createServer((req, res) => {
    asked.push(req.url ?? '');
    const body = routes[(req.url ?? '').split('?')[0]];
    res.writeHead(body === undefined ? 404 : 200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body ?? { error: 'not_found', message: `no route ${req.url}` }));
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url, asked, close: () => new Promise<void>((ok) => server.close(() => ok())) };
}

describe('against a fake API', () => {
  let api: Awaited<ReturnType<typeof fakeApi>>;
  let env: Record<string, string>;
  beforeAll(async () => {
    const installs = Array.from({ length: 5000 }, (_, i) => ({
      install_id: `inst_${i}`,
      name: `install-${i}`,
      app_id: 'app_1',
      app_config_id: 'cfg_1',
      labels: { n: String(i) },
    }));
    api = await fakeApi({
      '/v1/installs': installs,
      // install versions 1, 2, 3 applied config v1, v2, then v1 again (a rollback)
      '/v1/installs/inst_1/app-config-versions': [
        {
          version: 3,
          version_id: 'ver_three',
          app_config_id: 'cfg_1',
          old_app_config_id: 'cfg_2',
          app_config: { version: 1 },
          status: 'succeeded',
        },
        {
          version: 2,
          version_id: 'ver_two',
          app_config_id: 'cfg_2',
          old_app_config_id: 'cfg_1',
          app_config: { version: 2 },
          status: 'succeeded',
        },
        {
          version: 1,
          version_id: 'ver_one',
          app_config_id: 'cfg_1',
          old_app_config_id: null,
          app_config: { version: 1 },
          status: 'succeeded',
        },
      ],
      '/v1/installs/inst_1/app-config-versions/ver_three/diff': {
        version_id: 'ver_three',
        from_app_config_id: 'cfg_2',
        to_app_config_id: 'cfg_1',
        changed: true,
        components: { changed: [{ name: 'api', changes: [{ path: 'values.image', op: 'replace', old: 'api:2', new: 'api:1' }] }] },
      },
      '/v1/installs/inst_1/app-config-versions/ver_one/diff': {
        version_id: 'ver_one',
        from_app_config_id: null,
        to_app_config_id: 'cfg_1',
        changed: true,
        components: { added: [{ name: 'api' }] },
      },
      '/v1/installs/inst_1/app-config-versions/ver_two/diff': {
        version_id: 'ver_two',
        from_app_config_id: 'cfg_1',
        to_app_config_id: 'cfg_2',
        changed: true,
        components: { changed: [{ name: 'api', changes: [{ path: 'values.image', op: 'replace', old: 'api:1', new: 'api:2' }] }] },
      },
    });
    env = { SVC_API_URL: api.url, SVC_API_TOKEN: 'svc_tok', SVC_ORG_ID: 'org_1' };
  });
  afterAll(() => api.close());

  it('output to a closed pipe (`svc … | head -n 1`) ends quietly with exit 0, every time', { timeout: 60_000 }, async () => {
    for (let i = 0; i < 5; i++) {
      // pipefail: the shell's status is svc's, not head's
      const r = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
        const p = spawn('bash', ['-c', `set -o pipefail; "${process.execPath}" "${BIN}" installs list | head -n 1`], {
          cwd: ROOT,
          env: { ...process.env, ...env },
          stdio: ['ignore', 'pipe', 'pipe'],
        });
        let stdout = '';
        let stderr = '';
        p.stdout.on('data', (d) => (stdout += d));
        p.stderr.on('data', (d) => (stderr += d));
        p.on('exit', (code) => resolve({ code, stdout, stderr }));
      });
      expect(r.stdout).toMatch(/^INSTALL_ID\s+NAME/);
      expect(r.stderr, `run ${i}`).toBe('');
      expect(r.code, `run ${i}: ${r.stderr}`).toBe(0);
    }
  });

  it('a stdout closed before svc writes anything: exit 0, no stack trace', async () => {
    const r = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
      const p = spawn(process.execPath, [BIN, 'installs', 'list'], {
        cwd: ROOT,
        env: { ...process.env, ...env },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      p.stdout.destroy();
      let stderr = '';
      p.stderr.on('data', (d) => (stderr += d));
      p.on('exit', (code) => resolve({ code, stderr }));
    });
    expect(r.stderr).not.toMatch(/EPIPE|at .*\.js/);
    expect(r.code).toBe(0);
  });

  it('installs diff takes the version number that `installs versions` shows, and still the ver_ id', async () => {
    const n = api.asked.length;
    const byNumber = await cli(['installs', 'diff', 'inst_1', '1'], env);
    expect(byNumber.code, both(byNumber)).toBe(0);
    expect(byNumber.stdout).toMatch(/version_id:\s+ver_one/);
    expect(byNumber.stdout).toMatch(/\+ api \(added\)/);
    expect(api.asked.slice(n)).toEqual(['/v1/installs/inst_1/app-config-versions', '/v1/installs/inst_1/app-config-versions/ver_one/diff']);
    const byId = await cli(['installs', 'diff', 'inst_1', 'ver_two'], env);
    expect(byId.code, both(byId)).toBe(0);
    expect(byId.stdout).toMatch(/values\.image: "api:1" -> "api:2"/);
    const none = await cli(['installs', 'diff', 'inst_1', '7'], env);
    expect(none.code).toBe(1);
    expect(none.stderr).toMatch(/install inst_1 has no version 7/);
  });

  it(
    "installs versions shows each version's config version beside its ids; installs diff takes version:N, config:N (its latest " +
      'install version), N and ver_ (issue 56)',
    async () => {
      const versions = await cli(['installs', 'versions', 'inst_1'], env);
      expect(versions.code, both(versions)).toBe(0);
      const lines = versions.stdout.trim().split('\n');
      expect(lines[0]).toMatch(/^VERSION\s+CONFIG\s+VERSION_ID\s+APP_CONFIG_ID\s+FROM\s+OLD_APP_CONFIG_ID/);
      expect(lines[1]).toMatch(/^3\s+config v1\s+ver_three\s+cfg_1\s+config v2\s+cfg_2\s/);
      expect(lines[2]).toMatch(/^2\s+config v2\s+ver_two\s+cfg_2\s+config v1\s+cfg_1\s/);
      expect(lines[3]).toMatch(/^1\s+config v1\s+ver_one\s+cfg_1\s/);

      const diffOf = async (given: string) => {
        const r = await cli(['installs', 'diff', 'inst_1', given], env);
        expect(r.code, `${given}: ${both(r)}`).toBe(0);
        return r.stdout;
      };
      // install versions
      for (const given of ['version:2', '2']) {
        const out = await diffOf(given);
        expect(out).toMatch(/^version:\s+2$/m);
        expect(out).toMatch(/version_id:\s+ver_two/);
        expect(out).toMatch(/from:\s+config v1 \(cfg_1\)/);
        expect(out).toMatch(/to:\s+config v2 \(cfg_2\)/);
      }
      // config versions: v1 was applied at install versions 1 and 3, so config:1 means version 3
      const c1 = await diffOf('config:1');
      expect(c1).toMatch(/version_id:\s+ver_three/);
      expect(c1).toMatch(/values\.image: "api:2" -> "api:1"/);
      expect(await diffOf('config:2')).toMatch(/version_id:\s+ver_two/);
      expect(await diffOf('ver_one')).toMatch(/^version:\s+1$/m);

      const never = await cli(['installs', 'diff', 'inst_1', 'config:9'], env);
      expect(never.code).toBe(1);
      expect(never.stderr).toMatch(/install inst_1 never had config v9 applied/);
      const n = api.asked.length;
      for (const bad of ['config:x', 'version:', 'config:0', 'version:-1']) {
        const r = await cli(['installs', 'diff', 'inst_1', bad], env);
        expect(r.code, `${bad}: ${both(r)}`).toBe(2);
        expect(r.stderr).toMatch(/version:N \(the install version\), config:N \(the config version\)/);
      }
      expect(api.asked.length).toBe(n); // usage errors before any request

      const help = await cli(['installs', 'diff', '--help'], env);
      expect(help.stdout).toMatch(/^ +version:N or N +the install version: the VERSION column of `svc installs versions`/m);
      expect(help.stdout).toMatch(
        /^ +config:N +the config version: the CONFIG column .*\n +applied more than once, its latest install version/m,
      );
      expect(help.stdout).toMatch(/^ +ver_… +a version id/m);
    },
  );

  it('a bad --bake is a usage error (exit 2, nothing sent), like a bad --on-bad', async () => {
    const n = api.asked.length;
    for (const bake of ['10', 'ten minutes', '25h']) {
      const r = await runCliProcess(['apps', 'rollback', 'app_1', '--yes', '--bake', bake], env);
      expect(r.code, both(r)).toBe(2);
      expect(r.stderr).toMatch(/--bake .*a duration from 0s to 24h/);
    }
    const onBad = await cli(['apps', 'rollback', 'app_1', '--yes', '--bake', '10m', '--on-bad', 'retry'], env);
    expect(onBad.code).toBe(2);
    expect(api.asked.length).toBe(n);
  });
});

describe('against a real svc', () => {
  let svc: TestService;
  let org: OrgCreds;
  let env: Record<string, string>;
  beforeAll(async () => {
    svc = await startService();
    org = svc.createOrg('cli-fixes');
    env = { SVC_API_URL: svc.url, SVC_API_TOKEN: org.api_token, SVC_ORG_ID: org.org_id };
  });
  afterAll(() => svc.stop());

  it("GET /v1/apps: the org's apps newest first, paged by limit and after; another org sees none", async () => {
    const api = svc.api(org);
    const ids: string[] = [];
    for (const name of ['one', 'two', 'three']) ids.push((await api.post('/v1/apps', { name })).body.app_id);
    const all = await api.get('/v1/apps');
    expect(all.status).toBe(200);
    expect(all.body.map((a: any) => a.name)).toEqual(['three', 'two', 'one']);
    expect(Object.keys(all.body[0]).sort()).toEqual(['app_id', 'created_at', 'name']);
    const first = await api.get('/v1/apps?limit=2');
    expect(first.body.map((a: any) => a.app_id)).toEqual([ids[2], ids[1]]);
    const next = await api.get(`/v1/apps?limit=2&after=${first.body[1].app_id}`);
    expect(next.body.map((a: any) => a.app_id)).toEqual([ids[0]]);
    expect((await api.get('/v1/apps?limit=0')).status).toBe(400);
    expect((await api.get('/v1/apps?after=app_nope')).status).toBe(400);
    const other = svc.createOrg('other');
    expect((await svc.api(other).get('/v1/apps')).body).toEqual([]);
    expect((await svc.api(other).get(`/v1/apps?after=${ids[0]}`)).status).toBe(400);
  });

  it('svc apps list prints the table, --json the array', async () => {
    const r = await cli(['apps', 'list'], env);
    expect(r.code, both(r)).toBe(0);
    const lines = r.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^APP_ID\s+NAME\s+CREATED_AT$/);
    expect(lines[1]).toMatch(/^app_\S+\s+three\s/);
    const j = await cli(['apps', 'list', '--json', '--limit', '1'], env);
    expect(j.json.map((a: any) => a.name)).toEqual(['three']);
    expect((await cli(['apps', 'list', '--limit', 'x'], env)).code).toBe(2);
  });

  it('an API error names each detail once', async () => {
    const r = await runCliProcess(['webhooks', 'create', '--url', 'not a url'], env);
    expect(r.code, both(r)).toBe(1);
    const line = r.stderr.trim();
    expect(line).toMatch(/^error: invalid request: webhook_url must be an absolute http or https URL/);
    expect(line.split('webhook_url').length - 1, line).toBe(1);
  });
});

describe('svc nats creds and init', () => {
  let tmp: string;
  beforeAll(async () => {
    tmp = tmpDir('svc-cli-nats-');
  });

  it('creds refuses an org the database does not hold (and a missing database); issues them to one it holds', async () => {
    const dir = path.join(tmp, 'auth');
    expect((await cli(['nats', 'init', '--dir', dir])).code).toBe(0);
    const svc = await startService({ db: path.join(tmp, 'svc.db') });
    try {
      const org = svc.createOrg('creds');
      const nope = await runCliProcess(['nats', 'creds', '--dir', dir, '--org', 'org_nope', '--db', svc.db]);
      expect(nope.code).not.toBe(0);
      expect(nope.stderr).toMatch(/no org org_nope in .*svc\.db/);
      expect(nope.stdout).toBe('');
      const noDb = await cli(['nats', 'creds', '--dir', dir, '--org', org.org_id, '--db', path.join(tmp, 'missing.db')]);
      expect(noDb.code).not.toBe(0);
      expect(noDb.stderr).toMatch(/no database at .*missing\.db/);
      expect(fs.existsSync(path.join(tmp, 'missing.db'))).toBe(false);
      const ok = await cli(['nats', 'creds', '--dir', dir, '--org', org.org_id], { SVC_DB: svc.db });
      expect(ok.code, ok.stderr).toBe(0);
      expect(ok.stdout).toContain('-----BEGIN NATS USER JWT-----');
    } finally {
      await svc.stop();
    }
  });

  it('init warns when its directory is inside a git work tree that does not ignore it, and not once it is ignored', async () => {
    const repo = path.join(tmp, 'checkout');
    fs.mkdirSync(repo);
    const git = spawnSync('git', ['init', '-q', repo]);
    if (git.error) throw new Error(`git is needed for this test: ${git.error.message}`);
    const tracked = await cli(['nats', 'init', '--dir', path.join(repo, 'nats-auth')]);
    expect(tracked.code, tracked.stderr).toBe(0);
    expect(tracked.stderr).toMatch(/warning: .*nats-auth is inside the git work tree .*checkout and git does not ignore it/);
    fs.writeFileSync(path.join(repo, '.gitignore'), 'ignored-auth/\n');
    const ignored = await cli(['nats', 'init', '--dir', path.join(repo, 'ignored-auth')]);
    expect(ignored.code).toBe(0);
    expect(ignored.stderr).toBe('');
    const outside = await cli(['nats', 'init', '--dir', path.join(tmp, 'outside')]);
    expect(outside.code).toBe(0);
    expect(outside.stderr).toBe('');
    expect(fs.existsSync(path.join(tmp, 'outside', 'engine.creds'))).toBe(true);
  });
});

describe('a webhook to a target this svc refuses', () => {
  let svc: TestService;
  let org: OrgCreds;
  beforeAll(async () => {
    svc = await startService({ allowPrivateTargets: false });
    org = svc.createOrg('guarded');
  });
  afterAll(() => svc.stop());

  it('is created with a warning in the response, which the CLI prints on stderr; a public target has none', async () => {
    const api = svc.api(org);
    const local = await api.post('/v1/orgs/current/webhooks', { webhook_url: 'http://127.0.0.1:9/hook' });
    expect(local.status).toBe(201);
    expect(local.body.warnings).toHaveLength(1);
    expect(local.body.warnings[0]).toMatch(/target refused: .*loopback.*--allow-private-targets/);
    const pub = await api.post('/v1/orgs/current/webhooks', { webhook_url: 'http://93.184.216.34/hook' });
    expect(pub.status).toBe(201);
    expect(pub.body.warnings).toBeUndefined();
    const r = await cli(['webhooks', 'create', '--url', 'http://10.1.2.3/hook'], {
      SVC_API_URL: svc.url,
      SVC_API_TOKEN: org.api_token,
      SVC_ORG_ID: org.org_id,
    });
    expect(r.code, both(r)).toBe(0);
    expect(r.stdout).toMatch(/created webhook wh_/);
    expect(r.stderr).toMatch(/^warning: target refused: .*private/m);
  });
});
