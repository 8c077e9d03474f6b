// The API commands of `svc` (CONTRACT 7): installs (versions, diff, rollback), branch runs, fleet
// rollbacks, config vetoes and workflows; webhooks in webhook-commands.ts. Each talks to a running
// `svc serve` over HTTP. Exit codes: 0 success, 1 API error (main prints the server's message), 2
// usage error (always before any request).
import readline from 'node:readline/promises';
import type { Command } from 'commander';
import { seg } from './api-client.ts';
import { group, handle, leaf, parseSelector, str } from './command-kit.ts';
import { registerHistoryCommands } from './history-commands.ts';
import { registerIngestCommands } from './ingest-commands.ts';
import { registerTrigger, registerWebhookCommands } from './webhook-commands.ts';
import { registerWindowCommands } from './window-commands.ts';
import { registerApprovalCommands, registerApprovalPolicyCommands } from './approval-commands.ts';
import { ApiError, UsageError } from './exit-errors.ts';
import { bakeMs, MAX_BAKE_MS, MAX_GATE_FOR_MS } from '../domain/rollout.ts';
import type { AppConfigOut } from '../schemas/apps.ts';
import { verificationOf, withVerifyOption } from './verify-options.ts';
import { formatDiff, formatLabels, printFields, printJson, printTable, println, type DiffLike } from './output.ts';

// ---------------------------------------------------------------- installs and rollback

interface Install {
  install_id: string;
  name: string;
  app_id: string;
  app_config_id?: string | null;
  labels?: Record<string, string>;
}

interface ConfigVersion {
  version_id: string;
  /** the install version: 1, 2, 3 … per install */
  version: number;
  app_config_id: string;
  /** the app config applied; its `version` is the config version (1, 2, 3 … per app) */
  app_config?: { version?: number } | null;
  old_app_config_id?: string | null;
  workflow_id?: string | null;
  status?: string;
  created_at?: string;
}

interface UpdateResult {
  plan: DiffLike;
  applied: boolean;
  workflow_id?: string;
  version_id?: string;
}

async function confirm(question: string): Promise<boolean> {
  const rl = readline.createInterface({ input: process.stdin, output: process.stderr });
  try {
    const answer = await rl.question(question);
    return /^y(es)?$/i.test(answer.trim());
  } finally {
    rl.close();
  }
}

/**
 * A version as `installs diff` takes it (CONTRACT 7): `version:N` or a bare N, the install version
 * (`installs versions` shows it); `config:N`, the config version (the app's config vN; applied more
 * than once, its latest install version); anything else, a `ver_` id. Checked before any request.
 */
type VersionRef = { by: 'version' | 'config'; n: number } | { by: 'id'; id: string };

function versionRef(given: string): VersionRef {
  const m = /^(?:(version|config):)?(.*)$/.exec(given.trim())!;
  const [, kind, rest] = m;
  if (!kind && !/^\d+$/.test(rest)) return { by: 'id', id: given };
  if (!/^[1-9]\d{0,8}$/.test(rest))
    throw new UsageError(
      `version ${JSON.stringify(given)}: version:N (the install version), config:N (the config version), ` +
        'a bare N (the install version) or a ver_ id',
    );
  return { by: kind === 'config' ? 'config' : 'version', n: Number(rest) };
}

/** The config version of an app config applied to this install (`config v3`), as its versions show it. */
function configLabel(list: ConfigVersion[], appConfigId: string | null | undefined): string | null {
  if (!appConfigId) return null;
  const n = list.find((v) => v.app_config_id === appConfigId && typeof v.app_config?.version === 'number')?.app_config?.version;
  return n === undefined ? null : `config v${n}`;
}

function pickVersion(list: ConfigVersion[], installId: string, ref: VersionRef): ConfigVersion | undefined {
  if (ref.by === 'id') return list.find((v) => v.version_id === ref.id);
  const hint = `(svc installs versions ${installId} lists them)`;
  if (ref.by === 'version') {
    const v = list.find((x) => x.version === ref.n);
    if (!v) throw new ApiError(404, 'not_found', `install ${installId} has no version ${ref.n} ${hint}`);
    return v;
  }
  // config:N applied more than once: its latest install version
  const applied = list.filter((x) => x.app_config?.version === ref.n).sort((a, b) => b.version - a.version);
  if (!applied.length) throw new ApiError(404, 'not_found', `install ${installId} never had config v${ref.n} applied ${hint}`);
  return applied[0];
}

function registerInstalls(program: Command): void {
  const installs = group(program, 'installs', 'installs, their app config versions and rollback');
  registerInstallLists(installs);
  registerInstallDiff(installs);
  registerInstallRollback(installs);
}

/** `svc installs list` and `svc installs versions`. */
function registerInstallLists(installs: Command): void {
  handle(leaf(installs, 'list', "list the org's installs"), async (run) => {
    const list = await run.api().get<Install[]>('/v1/installs');
    if (run.json) return printJson(list);
    printTable(
      ['install_id', 'name', 'app_id', 'app_config_id', 'labels'],
      (list ?? []).map((i) => [i.install_id, i.name, i.app_id, i.app_config_id, formatLabels(i.labels)]),
      'no installs',
    );
  });

  handle(leaf(installs, 'versions <install_id>', "list an install's app config versions, newest first"), async (run) => {
    const [id] = run.args;
    const list = await run.api().get<ConfigVersion[]>(`/v1/installs/${seg(id)}/app-config-versions`);
    if (run.json) return printJson(list);
    const all = list ?? [];
    // VERSION is the install's (1, 2, 3 … each config applied); CONFIG the app's config version applied (its config vN)
    printTable(
      ['version', 'config', 'version_id', 'app_config_id', 'from', 'old_app_config_id', 'status', 'workflow_id', 'created_at'],
      all.map((v) => [
        v.version,
        configLabel(all, v.app_config_id),
        v.version_id,
        v.app_config_id,
        configLabel(all, v.old_app_config_id),
        v.old_app_config_id,
        v.status,
        v.workflow_id,
        v.created_at,
      ]),
      'no versions',
    );
  });
}

/** `svc installs diff`: what one of an install's versions changed. */
function registerInstallDiff(installs: Command): void {
  handle(
    leaf(
      installs,
      'diff <install_id> <version>',
      "show what one of the install's versions changed (VERSION: version:N, config:N, N or a ver_ id)",
    ).addHelpText(
      'after',
      [
        '',
        'VERSION is one of:',
        '  version:N or N   the install version: the VERSION column of `svc installs versions`',
        '                   (1, 2, 3 … one per config applied to the install)',
        "  config:N         the config version: the CONFIG column (the app's config vN);",
        '                   applied more than once, its latest install version',
        '  ver_…            a version id (VERSION_ID)',
      ].join('\n'),
    ),
    async (run) => {
      const [id, given] = run.args;
      const ref = versionRef(given);
      const list = (await run.api().get<ConfigVersion[]>(`/v1/installs/${seg(id)}/app-config-versions`)) ?? [];
      const picked = pickVersion(list, id, ref);
      const version = picked?.version_id ?? (ref.by === 'id' ? ref.id : '');
      const d = await run
        .api()
        .get<DiffLike & { version_id?: string; from_app_config_id?: string | null; to_app_config_id?: string }>(
          `/v1/installs/${seg(id)}/app-config-versions/${seg(version)}/diff`,
        );
      if (run.json) return printJson(d);
      const named = (cfg: string | null | undefined) => {
        const label = configLabel(list, cfg);
        return cfg ? (label ? `${label} (${cfg})` : cfg) : '(none)';
      };
      printFields([
        ...(picked ? [['version', picked.version] as [string, unknown]] : []),
        ['version_id', d.version_id ?? version],
        ['from', named(d.from_app_config_id)],
        ['to', named(d.to_app_config_id)],
      ]);
      println(formatDiff(d));
    },
  );
}

/** `svc installs rollback`: shows the plan, asks (unless --yes), then applies. */
function registerInstallRollback(installs: Command): void {
  handle(
    leaf(installs, 'rollback <install_id>', 'apply an (earlier) app config to an install; shows the plan first')
      .requiredOption('--app-config <app_config_id>', 'the app config to apply')
      .option('--plan-only', 'only show the plan; change nothing')
      .option('--yes', 'apply without asking for confirmation'),
    async (run) => {
      const [id] = run.args;
      const appConfigId = str(run.opts.appConfig) as string;
      const planOnly = run.opts.planOnly === true;
      const yes = run.opts.yes === true;
      const interactive = process.stdin.isTTY === true;
      if (!planOnly && !yes && !interactive) {
        throw new UsageError(
          'refusing to apply without confirmation: stdin is not a terminal; pass --yes to apply (or --plan-only to only see the plan)',
        );
      }
      const api = run.api();
      const path = `/v1/installs/${seg(id)}/app-config-updates`;
      const planned = await api.post<UpdateResult>(path, { app_config_id: appConfigId, plan_only: true });
      const planText = `plan for install ${id} -> app config ${appConfigId}:\n${formatDiff(planned.plan ?? {}, '  ')}`;
      if (planOnly) {
        if (run.json) return printJson(planned);
        println(planText);
        println('plan only: nothing was applied');
        return;
      }
      if (!yes) {
        // The plan goes to stderr in --json mode so stdout stays one JSON document.
        if (run.json) process.stderr.write(`${planText}\n`);
        else println(planText);
        if (!(await confirm(`apply app config ${appConfigId} to install ${id}? [y/N] `))) {
          throw new Error('aborted: nothing was applied');
        }
      } else if (!run.json) {
        println(planText);
      }
      const applied = await api.post<UpdateResult>(path, { app_config_id: appConfigId });
      if (run.json) return printJson(applied);
      printFields([
        ['applied', applied.applied ? 'yes' : 'no'],
        ['workflow_id', applied.workflow_id],
        ['version_id', applied.version_id],
      ]);
      if (applied.workflow_id) println(`follow it with: svc workflows get ${applied.workflow_id}`);
    },
  );
}

// ---------------------------------------------------------------- branch runs

/** The health gate and rollout policy options of a branch run and a fleet rollback (CONTRACT 4.3, 7). */
function withGateOptions(cmd: Command): Command {
  return cmd
    .option('--max-parallel <n>', 'rollout: at most this many installs of a group update at once (1 to 1000; default all)')
    .option('--failure-budget <pct>', 'rollout: a group still succeeds while at most this % of its installs failed (0 to 100; default 0)')
    .option(
      '--on-failure <action>',
      'rollout: when a group fails (deploy over budget, bake), halt or rollback what the run deployed (default: --on-bad, else halt)',
    )
    .option('--bake <duration>', 'health gate: after each group deploys, watch its installs this long (0s to 24h, e.g. 10m)')
    .option('--on-bad <action>', 'health gate: when a verdict turns bad, halt (default) or rollback the groups deployed')
    .option('--gate-for <duration>', 'health gate: a bad verdict trips it only once it has stayed bad this long (0s to 1h, e.g. 30s)');
}

/** The `rollout` body of --max-parallel, --failure-budget and --on-failure; undefined without any. */
function rolloutPolicyOf(opts: Record<string, unknown>): Record<string, unknown> | undefined {
  const out: Record<string, unknown> = {};
  const par = str(opts.maxParallel);
  if (par !== undefined) {
    const n = Number(par);
    if (!/^\d+$/.test(par) || n < 1 || n > 1000)
      throw new UsageError(`--max-parallel ${JSON.stringify(par)}: a whole number from 1 to 1000`);
    out.max_parallel = n;
  }
  const pct = str(opts.failureBudget);
  if (pct !== undefined) {
    const n = Number(pct.replace(/%$/, ''));
    if (pct.trim() === '' || !Number.isFinite(n) || n < 0 || n > 100)
      throw new UsageError(`--failure-budget ${JSON.stringify(pct)}: a percentage from 0 to 100`);
    out.failure_budget = { max_failed_pct: n };
  }
  const onFailure = str(opts.onFailure);
  if (onFailure !== undefined) {
    if (onFailure !== 'halt' && onFailure !== 'rollback')
      throw new UsageError(`--on-failure ${JSON.stringify(onFailure)}: halt or rollback`);
    out.on_failure = onFailure;
  }
  return Object.keys(out).length ? out : undefined;
}

/** The `health_gate` body of --bake, --on-bad and --gate-for; undefined without --bake. */
function healthGateOf(opts: Record<string, unknown>): Record<string, unknown> | undefined {
  const onBad = str(opts.onBad);
  if (onBad !== undefined && onBad !== 'halt' && onBad !== 'rollback')
    throw new UsageError(`--on-bad ${JSON.stringify(onBad)}: halt or rollback`);
  const bake = str(opts.bake);
  if (bake !== undefined) {
    const ms = bakeMs(bake);
    if (ms === null || ms > MAX_BAKE_MS)
      throw new UsageError(`--bake ${JSON.stringify(bake)}: a duration from 0s to 24h with its unit (e.g. 90s, 10m, 1h)`);
  }
  const gateFor = str(opts.gateFor);
  if (gateFor !== undefined) {
    const ms = bakeMs(gateFor);
    if (ms === null || ms > MAX_GATE_FOR_MS)
      throw new UsageError(`--gate-for ${JSON.stringify(gateFor)}: a duration from 0s to 1h with its unit (e.g. 30s, 5m)`);
  }
  if (bake === undefined) {
    if (onBad !== undefined) throw new UsageError('--on-bad needs --bake (the health gate it configures)');
    if (gateFor !== undefined) throw new UsageError('--gate-for needs --bake (the health gate it configures)');
    return undefined;
  }
  return { bake, ...(onBad ? { action: onBad } : {}), ...(gateFor ? { for: gateFor } : {}) };
}

function registerBranches(program: Command): void {
  const branches = group(program, 'branches', 'app branches: roll a config out across install groups');
  handle(
    withVerifyOption(
      withGateOptions(
        leaf(branches, 'run <app_id> <app_branch_id>', 'start a branch run (plans each install group and waits for approval)')
          .requiredOption('--app-config <app_config_id>', 'the app config to roll out (an older one to roll back)')
          .option('--skip-builds', 'skip the build step (artifacts for that config already exist)'),
      ),
    ),
    async (run) => {
      const [app, branch] = run.args;
      const gate = healthGateOf(run.opts);
      const policy = rolloutPolicyOf(run.opts);
      const verification = verificationOf(run.opts);
      const r = await run.api().post<{ run_id: string; workflow_id: string }>(`/v1/apps/${seg(app)}/branches/${seg(branch)}/runs`, {
        app_config_id: str(run.opts.appConfig),
        skip_builds: run.opts.skipBuilds === true,
        ...(gate ? { health_gate: gate } : {}),
        ...(policy ? { rollout: policy } : {}),
        ...(verification ? { verification } : {}),
      });
      if (run.json) return printJson(r);
      printFields([
        ['run_id', r.run_id],
        ['workflow_id', r.workflow_id],
      ]);
      println(`each install group waits for approval: svc workflows get ${r.workflow_id}`);
    },
  );
}

// ---------------------------------------------------------------- apps: fleet rollback; configs: veto

interface FleetPlan {
  installs: Array<{
    install_id: string;
    install_name: string;
    install_group: string;
    old_app_config_id: string | null;
    new_app_config_id: string;
    diff: DiffLike;
    vetoed?: { reason: string; at: string };
    scheduled_at?: string | null;
    blocked_by?: string[];
    blocked_by_names?: string[];
  }>;
  skipped: Array<{ install_id: string; reason: string }>;
}

/** A fleet rollback plan as people read it: per group and install the move and its diff, then what is skipped and why. */
export function formatFleetPlan(plan: FleetPlan): string {
  const out: string[] = [];
  let group: string | null = null;
  for (const i of plan.installs) {
    if (i.install_group !== group) {
      group = i.install_group;
      out.push(`group ${group}:`);
    }
    const veto = i.vetoed ? ` VETOED: ${i.vetoed.reason}` : '';
    out.push(`  install ${i.install_name} (${i.install_id}): ${i.old_app_config_id ?? '(none)'} -> ${i.new_app_config_id}${veto}`);
    if (i.blocked_by?.length) {
      const starts = i.scheduled_at ?? 'when a window changes (none opens within two weeks)';
      const windows = i.blocked_by.map((id, k) => (i.blocked_by_names?.[k] ? `${i.blocked_by_names[k]} (${id})` : id));
      out.push(`    waits for change window ${windows.join(', ')}: starts ${starts}`);
    }
    out.push(formatDiff(i.diff, '    '));
  }
  if (!plan.installs.length) out.push('no install to roll back');
  for (const s of plan.skipped) out.push(`skipped ${s.install_id}: ${s.reason}`);
  return out.join('\n');
}

const collect = (v: string, prev: string[]) => [...prev, v];

function registerApps(program: Command): void {
  const apps = group(program, 'apps', 'apps: list them, roll a fleet of installs back, their change windows');
  registerWindowCommands(apps);
  registerApprovalPolicyCommands(apps);
  handle(
    leaf(apps, 'list', "list the org's apps, newest first")
      .option('--limit <n>', 'at most this many (1 to 500, default 100)')
      .option('--after <app_id>', 'the apps created before this one (the next page)'),
    async (run) => {
      const limit = str(run.opts.limit);
      if (limit !== undefined && (!/^\d+$/.test(limit) || Number(limit) < 1 || Number(limit) > 500))
        throw new UsageError(`--limit ${JSON.stringify(limit)}: a whole number from 1 to 500`);
      const q = new URLSearchParams();
      if (limit !== undefined) q.set('limit', limit);
      const after = str(run.opts.after);
      if (after !== undefined) q.set('after', after);
      const list = await run.api().get<Array<{ app_id: string; name: string; created_at: string }>>(`/v1/apps${q.size ? `?${q}` : ''}`);
      if (run.json) return printJson(list);
      printTable(
        ['app_id', 'name', 'created_at'],
        (list ?? []).map((a) => [a.app_id, a.name, a.created_at]),
        'no apps',
      );
    },
  );
  handle(
    withVerifyOption(
      withGateOptions(
        leaf(
          apps,
          'rollback <app_id>',
          "roll an app's installs back, group by group (the app's branch groups, then `other`); shows the plan first",
        )
          .option(
            '--to <previous|app_config_id>',
            'each install to the config of its version before the current one (previous), or one app config',
            'previous',
          )
          .option('--selector <k=v,...>', 'only the installs with these labels')
          .option('--install <install_id>', 'only this install (repeat for more)', collect, [] as string[])
          .option('--plan-only', 'only show the plan; change nothing')
          .option('--yes', 'apply without asking for confirmation'),
      ),
    ).option('--no-approval', 'deploy each group without waiting for an approval'),
    async (run) => {
      const [app] = run.args;
      const gate = healthGateOf(run.opts);
      const policy = rolloutPolicyOf(run.opts);
      const verification = verificationOf(run.opts);
      const selector = str(run.opts.selector);
      const installs = (run.opts.install as string[] | undefined) ?? [];
      const planOnly = run.opts.planOnly === true;
      const yes = run.opts.yes === true;
      if (!planOnly && !yes && process.stdin.isTTY !== true) {
        throw new UsageError(
          'refusing to apply without confirmation: stdin is not a terminal; pass --yes to apply (or --plan-only to only see the plan)',
        );
      }
      const body: Record<string, unknown> = { to: str(run.opts.to) ?? 'previous' };
      if (installs.length) body.install_ids = installs;
      if (selector !== undefined) body.selector = { match_labels: parseSelector(selector) };
      if (gate) body.health_gate = gate;
      if (policy) body.rollout = policy;
      if (verification) body.verification = verification;
      if (run.opts.approval === false) body.approval = 'none';
      const api = run.api();
      const path = `/v1/apps/${seg(app)}/rollbacks`;
      const planned = await api.post<{ plan: FleetPlan; applied: false }>(path, { ...body, plan_only: true });
      const planText = `plan for app ${app} -> ${String(body.to)}:\n${formatFleetPlan(planned.plan)}`;
      if (planOnly) {
        if (run.json) return printJson(planned);
        println(planText);
        println('plan only: nothing was applied');
        return;
      }
      // the plan comes first (on stderr with --json, so that stdout stays one JSON document)
      if (run.json) process.stderr.write(`${planText}\n`);
      else println(planText);
      if (!yes && !(await confirm(`roll back ${planned.plan.installs.length} install(s) of app ${app}? [y/N] `))) {
        throw new Error('aborted: nothing was applied');
      }
      const r = await api.post<{ run_id: string; workflow_id: string; status: string }>(path, body);
      if (run.json) return printJson(r);
      printFields([
        ['run_id', r.run_id],
        ['workflow_id', r.workflow_id],
        ['status', r.status],
      ]);
      println(`follow it with: svc workflows get ${r.workflow_id}`);
    },
  );
}

function registerConfigs(program: Command): void {
  const configs = group(program, 'configs', "an app's configs: veto one so that nobody applies it");
  const show = (c: AppConfigOut) =>
    printFields([
      ['app_config_id', c.app_config_id],
      ['version', c.version],
      ['vetoed', c.vetoed ? `${c.vetoed.reason} (since ${c.vetoed.at})` : 'no'],
    ]);
  handle(
    leaf(configs, 'veto <app_id> <app_config_id>', 'veto an app config: applying it is refused (409 vetoed) until unvetoed').requiredOption(
      '--reason <reason>',
      'why (shown to whoever tries to apply it)',
    ),
    async (run) => {
      const [app, cfg] = run.args;
      const c = await run.api().post<AppConfigOut>(`/v1/apps/${seg(app)}/configs/${seg(cfg)}/veto`, { reason: str(run.opts.reason) });
      if (run.json) return printJson(c);
      show(c);
    },
  );
  handle(leaf(configs, 'unveto <app_id> <app_config_id>', "lift an app config's veto"), async (run) => {
    const [app, cfg] = run.args;
    const c = await run.api().del<AppConfigOut>(`/v1/apps/${seg(app)}/configs/${seg(cfg)}/veto`);
    if (run.json) return printJson(c);
    show(c);
  });
}

// ---------------------------------------------------------------- workflows

interface Step {
  step_id: string;
  name: string;
  idx: number;
  status: string;
  execution_type?: string;
  target_type?: string | null;
  target_id?: string | null;
  approval?: { status?: string; note?: string | null; responded_at?: string | null } | null;
  plan?: unknown;
}

interface Workflow {
  workflow_id: string;
  type: string;
  status: string;
  owner_id?: string;
  owner_type?: string;
  parent?: { workflow_id?: string; step_id?: string } | null;
  outcome?: { error?: string } | null;
  error?: string | null;
  steps?: Step[];
}

interface GroupPlan {
  install_group?: string;
  installs?: Array<{
    install_id: string;
    install_name?: string;
    old_app_config_id?: string | null;
    new_app_config_id?: string;
    diff?: DiffLike;
  }>;
}

function printGroupPlan(plan: GroupPlan): void {
  const installs = plan.installs ?? [];
  if (!installs.length) {
    println('    (no installs in this group)');
    return;
  }
  for (const i of installs) {
    println(`    ${i.install_name ?? i.install_id} (${i.install_id}): ${i.old_app_config_id ?? '(none)'} -> ${i.new_app_config_id ?? '?'}`);
    if (i.diff) println(formatDiff(i.diff, '      '));
  }
}

function registerWorkflows(program: Command): void {
  const workflows = group(program, 'workflows', 'inspect workflows, answer approvals, cancel');

  handle(leaf(workflows, 'get <workflow_id>', 'show a workflow and its steps'), async (run) => {
    const [id] = run.args;
    const wf = await run.api().get<Workflow>(`/v1/workflows/${seg(id)}`);
    if (run.json) return printJson(wf);
    const fields: Array<[string, unknown]> = [
      ['workflow_id', wf.workflow_id],
      ['type', wf.type],
      ['status', wf.status],
      ['owner', wf.owner_type || wf.owner_id ? `${wf.owner_type ?? '?'}/${wf.owner_id ?? '?'}` : undefined],
    ];
    if (wf.parent) fields.push(['parent', `${wf.parent.workflow_id ?? '?'} step ${wf.parent.step_id ?? '?'}`]);
    const error = wf.outcome?.error ?? wf.error;
    if (error) fields.push(['error', error]);
    printFields(fields);
    println();
    const steps = [...(wf.steps ?? [])].sort((a, b) => a.idx - b.idx);
    printTable(
      ['idx', 'step_id', 'name', 'status', 'execution_type', 'target'],
      steps.map((s) => [
        s.idx,
        s.step_id,
        s.name,
        s.status,
        s.execution_type,
        s.target_type ? `${s.target_type}/${s.target_id ?? '-'}` : undefined,
      ]),
      'no steps',
    );
    for (const s of steps) {
      if (s.status !== 'awaiting_approval') continue;
      println();
      println(`step ${s.step_id} (${s.name}) awaits approval: svc workflows approve|reject ${wf.workflow_id} ${s.step_id}`);
      if (s.plan && typeof s.plan === 'object') printGroupPlan(s.plan as GroupPlan);
    }
  });

  for (const [verb, response] of [
    ['approve', 'approved'],
    ['reject', 'rejected'],
  ] as const) {
    handle(
      leaf(workflows, `${verb} <workflow_id> <step_id>`, `${verb} a step that awaits approval`).option(
        '--note <note>',
        'a note recorded with the answer',
      ),
      async (run) => {
        const [id, step] = run.args;
        const body: Record<string, unknown> = { response };
        const note = str(run.opts.note);
        if (note !== undefined) body.note = note;
        const s = await run.api().post<Step>(`/v1/workflows/${seg(id)}/steps/${seg(step)}/approval`, body);
        if (run.json) return printJson(s);
        printFields([
          ['step_id', s?.step_id ?? step],
          ['name', s?.name],
          ['status', s?.status],
          ['approval', s?.approval?.status ?? response],
          ['note', s?.approval?.note ?? note],
        ]);
      },
    );
  }

  handle(leaf(workflows, 'cancel <workflow_id>', 'cancel a workflow'), async (run) => {
    const [id] = run.args;
    const wf = await run.api().post<Workflow>(`/v1/workflows/${seg(id)}/cancel`);
    if (run.json) return printJson(wf);
    printFields([
      ['workflow_id', wf?.workflow_id ?? id],
      ['status', wf?.status],
    ]);
  });
}

// ---------------------------------------------------------------- entry point

/** Register `svc webhooks|installs|branches|apps|configs|workflows …` on the program. */
export function registerApiCommands(program: Command): void {
  registerHistoryCommands(program, registerWebhookCommands(program));
  registerTrigger(program);
  registerInstalls(program);
  registerBranches(program);
  registerApps(program);
  registerConfigs(program);
  registerWorkflows(program);
  registerApprovalCommands(program);
  registerIngestCommands(program);
}
