// The API commands of `svc` (CONTRACT 7): webhooks, installs (versions, diff, rollback), branch runs
// and workflows. Each talks to a running `svc serve` over HTTP. Exit codes: 0 success, 1 API error
// (main prints the server's message), 2 usage error (always before any request).
import fs from 'node:fs';
import readline from 'node:readline/promises';
import type { Command } from 'commander';
import type { DeliveryStatus } from '../../store/delivery-status.ts';
import { parseDuration } from '../config.ts';
import { seg } from './api-client.ts';
import { group, handle, leaf, str } from './command-kit.ts';
import { registerHistoryCommands } from './history-commands.ts';
import { UsageError } from './errors.ts';
import { formatDiff, formatLabels, formatLastDelivery, printFields, printJson, printTable, println, type DiffLike } from './output.ts';

// ---------------------------------------------------------------- subscription documents (spec 2.4)

/** The subscription document of --subscription / --subscription-file, or undefined when neither. */
export function readSubscriptionDocument(opts: Record<string, unknown>): Record<string, unknown> | undefined {
  const inline = str(opts.subscription);
  const file = str(opts.subscriptionFile);
  if (inline !== undefined && file !== undefined) {
    throw new UsageError('--subscription and --subscription-file are mutually exclusive: give the subscription document one way');
  }
  if (inline === undefined && file === undefined) return undefined;
  let text: string;
  let where: string;
  if (file !== undefined) {
    where = `--subscription-file ${file}`;
    try {
      text = fs.readFileSync(file, 'utf8');
    } catch (err) {
      throw new UsageError(`cannot read ${where}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    }
  } else {
    where = '--subscription';
    text = inline as string;
  }
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (err) {
    throw new UsageError(`${where} is not valid JSON: ${(err as Error).message}`);
  }
  if (!doc || typeof doc !== 'object' || Array.isArray(doc)) {
    throw new UsageError(`${where} must be a JSON object {"interests"?: {...}, "match"?: {...} | null}`);
  }
  const unknown = Object.keys(doc).filter((k) => k !== 'interests' && k !== 'match');
  if (unknown.length) {
    throw new UsageError(
      `${where}: unknown key${unknown.length > 1 ? 's' : ''} ${unknown.map((k) => JSON.stringify(k)).join(', ')}; the subscription document is {"interests"?: {...}, "match"?: {...} | null}`,
    );
  }
  const d = doc as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  if ('interests' in d) out.interests = d.interests;
  if ('match' in d) out.match = d.match;
  return out;
}

// ---------------------------------------------------------------- secrets (--secret, --secret-file, --previous-secret-ttl)

/**
 * Check the secret options of create (and update, with removeSecret and previousSecretTtl) for
 * conflicts, before anything is read or sent. True when they name a new secret.
 */
export function checkSecretOptions(opts: Record<string, unknown>): boolean {
  const inline = str(opts.secret) !== undefined;
  const file = str(opts.secretFile) !== undefined;
  if (inline && file) throw new UsageError('--secret and --secret-file are mutually exclusive: give the secret one way');
  if (opts.removeSecret === true && (inline || file)) {
    throw new UsageError(`${inline ? '--secret' : '--secret-file'} and --remove-secret are mutually exclusive`);
  }
  if (opts.previousSecretTtl !== undefined && !inline && !file) {
    throw new UsageError('--previous-secret-ttl needs a new secret (--secret or --secret-file): it is how long the old one keeps signing beside it');
  }
  return inline || file;
}

/**
 * --previous-secret-ttl as whole seconds (CONTRACT 4.1 previous_secret_ttl_s): a duration like
 * 30m, 1h or 7d, at most 7 days; 0 is a hard cut.
 */
export async function parseSecretTtl(text: string): Promise<number> {
  // the limit lives with the API's validation (zod), loaded only when this option is used
  const { MAX_PREVIOUS_SECRET_TTL_S } = await import('../domain/subscription.ts');
  const t = text.trim();
  if (/^0+(?:\.0*)?(?:ms|s|m|h|d)?$/.test(t)) return 0;
  let ms: number;
  try {
    ms = parseDuration(t);
  } catch {
    throw new UsageError(`--previous-secret-ttl ${JSON.stringify(text)} is not a duration (use e.g. 30m, 1h, 7d)`);
  }
  if (ms % 1000 !== 0) throw new UsageError(`--previous-secret-ttl ${JSON.stringify(text)} is not a whole number of seconds`);
  if (ms / 1000 > MAX_PREVIOUS_SECRET_TTL_S) throw new UsageError(`--previous-secret-ttl ${JSON.stringify(text)} is over 7 days (7d)`);
  return ms / 1000;
}

async function readStream(stream: NodeJS.ReadableStream): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of stream as AsyncIterable<Buffer | string>) chunks.push(typeof c === 'string' ? Buffer.from(c) : c);
  return Buffer.concat(chunks).toString('utf8');
}

/**
 * The new secret of --secret, or of --secret-file (`-` = stdin) without exactly one trailing
 * newline (\n or \r\n); undefined when neither. Never echoes the secret in an error.
 */
export async function readSecret(opts: Record<string, unknown>, stdin: NodeJS.ReadableStream = process.stdin): Promise<string | undefined> {
  const file = str(opts.secretFile);
  if (file === undefined) return str(opts.secret);
  const where = file === '-' ? '--secret-file - (stdin)' : `--secret-file ${file}`;
  let text: string;
  try {
    text = file === '-' ? await readStream(stdin) : fs.readFileSync(file, 'utf8');
  } catch (err) {
    throw new UsageError(`cannot read ${where}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  const secret = text.replace(/\r?\n$/, '');
  if (!secret) throw new UsageError(`${where} is empty`);
  return secret;
}

// ---------------------------------------------------------------- webhooks

interface Webhook {
  webhook_id: string;
  webhook_url: string;
  has_secret: boolean;
  interests: unknown;
  match: unknown;
  created_at?: string;
  updated_at?: string;
  previous_secret_expires_at?: string | null;
  delivery_status?: Partial<DeliveryStatus> | null;
}

const WEBHOOKS = '/v1/orgs/current/webhooks';

/** A one-line summary of an interests document. */
export function summarizeInterests(i: unknown): string {
  if (!i || typeof i !== 'object') return '-';
  const o = i as Record<string, unknown>;
  if (o.all_events === true) return 'all events';
  const r = o.resources;
  if (!r || typeof r !== 'object') return JSON.stringify(i);
  const parts = Object.entries(r as Record<string, unknown>).map(([name, cfg]) => {
    const c = (cfg ?? {}) as Record<string, unknown>;
    const bits: string[] = [];
    if (Array.isArray(c.ops) && c.ops.length) bits.push(c.ops.join('|'));
    if (typeof c.outcome === 'string' && c.outcome !== 'all') bits.push(c.outcome);
    for (const f of ['approval_requests', 'approval_responses', 'drift_detected', 'component_health', 'install_degraded']) {
      if (c[f] === true) bits.push(f);
    }
    return bits.length ? `${name}(${bits.join(',')})` : name;
  });
  return parts.join(' ') || '-';
}

/** A one-line summary of a match predicate; null is org-wide. */
export function summarizeMatch(m: unknown): string {
  if (m === null || m === undefined) return 'org-wide';
  if (typeof m !== 'object') return JSON.stringify(m);
  const parts = Object.entries(m as Record<string, unknown>).map(([kind, f]) => {
    const k = (f ?? {}) as { ids?: unknown; selector?: { match_labels?: unknown } };
    const bits: string[] = [];
    if (Array.isArray(k.ids)) bits.push(k.ids.join('|'));
    if (k.selector && typeof k.selector === 'object') bits.push(formatLabels(k.selector.match_labels));
    return `${kind}(${bits.length ? bits.join(' ') : 'any'})`;
  });
  return parts.join(' ');
}

/** The SECRET cell: yes, no, or rotating (a rotated-out secret still signs beside the new one). */
const secretCell = (w: Webhook) => (!w.has_secret ? 'no' : w.previous_secret_expires_at ? 'rotating' : 'yes');

function printWebhook(w: Webhook): void {
  const d = w.delivery_status ?? {};
  printFields([
    ['webhook_id', w.webhook_id],
    ['webhook_url', w.webhook_url],
    ['has_secret', w.has_secret],
    ...(w.previous_secret_expires_at ? [['previous_secret_expires_at', w.previous_secret_expires_at] as [string, unknown]] : []),
    ['interests', w.interests],
    ['match', w.match === null ? 'null (org-wide)' : w.match],
    ['created_at', w.created_at],
    ['updated_at', w.updated_at],
    ['last_delivery', formatLastDelivery(d)],
    ['consecutive_failures', d.consecutive_failures ?? 0],
    ['attempts_total', d.attempts_total ?? 0],
    ['failures_total', d.failures_total ?? 0],
  ]);
}

function registerWebhooks(program: Command): Command {
  const webhooks = group(program, 'webhooks', 'manage the org\'s webhook subscriptions');

  handle(leaf(webhooks, 'list', 'list the org\'s webhooks'), async (run) => {
    const list = await run.api().get<Webhook[]>(WEBHOOKS);
    if (run.json) return printJson(list);
    // FAILS: consecutive failures now; ATTEMPTS and FAILURES: totals (CONTRACT 4.1 delivery_status)
    printTable(
      ['webhook_id', 'webhook_url', 'secret', 'interests', 'match', 'last', 'fails', 'attempts', 'failures', 'created_at'],
      (list ?? []).map((w) => {
        const d = w.delivery_status ?? {};
        return [
          w.webhook_id,
          w.webhook_url,
          secretCell(w),
          summarizeInterests(w.interests),
          summarizeMatch(w.match),
          formatLastDelivery(d),
          d.consecutive_failures ?? 0,
          d.attempts_total ?? 0,
          d.failures_total ?? 0,
          w.created_at,
        ];
      }),
      'no webhooks',
    );
  });

  handle(
    leaf(webhooks, 'create', 'register a webhook (default subscription: every event, org-wide)')
      .requiredOption('--url <url>', 'the receiver URL (absolute http or https)')
      .option('--secret <secret>', 'signing secret (X-Svc-Signature and webhook-signature; whsec_<base64> or any string); never printed')
      .option('--secret-file <path>', 'read the signing secret from a file (- = stdin; one trailing newline dropped), so it stays out of the process list')
      .option('--subscription <json>', 'subscription document {"interests"?, "match"?} as inline JSON')
      .option('--subscription-file <path>', 'subscription document {"interests"?, "match"?} from a JSON file'),
    async (run) => {
      checkSecretOptions(run.opts);
      const sub = readSubscriptionDocument(run.opts);
      const body: Record<string, unknown> = { webhook_url: str(run.opts.url) };
      const secret = await readSecret(run.opts);
      if (secret !== undefined) body.secret = secret;
      if (sub) Object.assign(body, sub);
      const w = await run.api().post<Webhook>(WEBHOOKS, body);
      if (run.json) return printJson(w);
      println(`created webhook ${w.webhook_id}`);
      printWebhook(w);
    },
  );

  handle(
    leaf(webhooks, 'update <webhook_id>', 'rotate or remove the secret, or replace the subscription wholesale')
      .option('--secret <secret>', 'a new signing secret (rotation); never printed')
      .option('--secret-file <path>', 'read the new signing secret from a file (- = stdin; one trailing newline dropped)')
      .option('--previous-secret-ttl <duration>', 'with a new secret: keep the old one signing beside it this long (e.g. 30m, 1h, 7d; at most 7d; default a hard cut)')
      .option('--remove-secret', 'remove the signing secret (deliveries are no longer signed)')
      .option('--subscription <json>', 'new subscription document {"interests"?, "match"?} (replaces both)')
      .option('--subscription-file <path>', 'new subscription document from a JSON file (replaces both)'),
    async (run) => {
      const [id] = run.args;
      const newSecret = checkSecretOptions(run.opts);
      const ttlText = str(run.opts.previousSecretTtl);
      const ttl = ttlText === undefined ? undefined : await parseSecretTtl(ttlText);
      const sub = readSubscriptionDocument(run.opts);
      if (!newSecret && run.opts.removeSecret !== true && !sub) {
        throw new UsageError('nothing to update: pass --secret, --secret-file, --remove-secret, --subscription or --subscription-file');
      }
      const body: Record<string, unknown> = {};
      const secret = await readSecret(run.opts);
      if (secret !== undefined) body.secret = secret;
      if (ttl !== undefined) body.previous_secret_ttl_s = ttl;
      if (run.opts.removeSecret === true) body.secret = null;
      if (sub) {
        Object.assign(body, sub);
        // An empty document still means "replace the subscription" (with the defaults: every event,
        // org-wide); naming match makes the body a subscription replacement (CONTRACT 4.1).
        if (!('interests' in sub) && !('match' in sub)) body.match = null;
      }
      const w = await run.api().patch<Webhook>(`${WEBHOOKS}/${seg(id)}`, body);
      if (run.json) return printJson(w);
      println(`updated webhook ${w.webhook_id}`);
      printWebhook(w);
    },
  );

  handle(leaf(webhooks, 'delete <webhook_id>', 'delete a webhook'), async (run) => {
    const [id] = run.args;
    await run.api().del(`${WEBHOOKS}/${seg(id)}`);
    if (run.json) return printJson({ webhook_id: id, deleted: true });
    println(`deleted webhook ${id}`);
  });

  handle(leaf(webhooks, 'ping <webhook_id>', 'send one signed com.svc.webhook.ping.v1 event to a webhook (exit 1 when it is not delivered)'), async (run) => {
    const [id] = run.args;
    const r = await run.api().post<{ delivered: boolean; status?: number | null; error?: string | null; duration_ms?: number }>(
      `${WEBHOOKS}/${seg(id)}/ping`,
    );
    if (run.json) printJson(r);
    else {
      printFields([
        ['delivered', r.delivered ? 'yes' : 'no'],
        ['status', r.status],
        ['error', r.error],
        ['duration_ms', r.duration_ms],
      ]);
    }
    // the result is printed either way; an undelivered ping is a failure of the command (exit 1)
    if (!r.delivered) throw new Error(`the ping was not delivered${r.error ? ` (${r.error})` : r.status ? ` (HTTP ${r.status})` : ''}`);
  });
  return webhooks;
}

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
  version: number;
  app_config_id: string;
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

function registerInstalls(program: Command): void {
  const installs = group(program, 'installs', 'installs, their app config versions and rollback');

  handle(leaf(installs, 'list', 'list the org\'s installs'), async (run) => {
    const list = await run.api().get<Install[]>('/v1/installs');
    if (run.json) return printJson(list);
    printTable(
      ['install_id', 'name', 'app_id', 'app_config_id', 'labels'],
      (list ?? []).map((i) => [i.install_id, i.name, i.app_id, i.app_config_id, formatLabels(i.labels)]),
      'no installs',
    );
  });

  handle(leaf(installs, 'versions <install_id>', 'list an install\'s app config versions, newest first'), async (run) => {
    const [id] = run.args;
    const list = await run.api().get<ConfigVersion[]>(`/v1/installs/${seg(id)}/app-config-versions`);
    if (run.json) return printJson(list);
    printTable(
      ['version', 'version_id', 'app_config_id', 'old_app_config_id', 'status', 'workflow_id', 'created_at'],
      (list ?? []).map((v) => [v.version, v.version_id, v.app_config_id, v.old_app_config_id, v.status, v.workflow_id, v.created_at]),
      'no versions',
    );
  });

  handle(leaf(installs, 'diff <install_id> <version_id>', 'show what an app config version changed'), async (run) => {
    const [id, version] = run.args;
    const d = await run.api().get<DiffLike & { version_id?: string; from_app_config_id?: string | null; to_app_config_id?: string }>(
      `/v1/installs/${seg(id)}/app-config-versions/${seg(version)}/diff`,
    );
    if (run.json) return printJson(d);
    printFields([
      ['version_id', d.version_id ?? version],
      ['from', d.from_app_config_id ?? '(none)'],
      ['to', d.to_app_config_id],
    ]);
    println(formatDiff(d));
  });

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
        throw new UsageError('refusing to apply without confirmation: stdin is not a terminal; pass --yes to apply (or --plan-only to only see the plan)');
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

function registerBranches(program: Command): void {
  const branches = group(program, 'branches', 'app branches: roll a config out across install groups');
  handle(
    leaf(branches, 'run <app_id> <app_branch_id>', 'start a branch run (plans each install group and waits for approval)')
      .requiredOption('--app-config <app_config_id>', 'the app config to roll out (an older one to roll back)')
      .option('--skip-builds', 'skip the build step (artifacts for that config already exist)'),
    async (run) => {
      const [app, branch] = run.args;
      const r = await run
        .api()
        .post<{ run_id: string; workflow_id: string }>(`/v1/apps/${seg(app)}/branches/${seg(branch)}/runs`, {
          app_config_id: str(run.opts.appConfig),
          skip_builds: run.opts.skipBuilds === true,
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
  installs?: Array<{ install_id: string; install_name?: string; old_app_config_id?: string | null; new_app_config_id?: string; diff?: DiffLike }>;
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
      steps.map((s) => [s.idx, s.step_id, s.name, s.status, s.execution_type, s.target_type ? `${s.target_type}/${s.target_id ?? '-'}` : undefined]),
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
      leaf(workflows, `${verb} <workflow_id> <step_id>`, `${verb} a step that awaits approval`).option('--note <note>', 'a note recorded with the answer'),
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

/** Register `svc webhooks|installs|branches|workflows …` on the program. */
export function registerApiCommands(program: Command): void {
  registerHistoryCommands(program, registerWebhooks(program));
  registerInstalls(program);
  registerBranches(program);
  registerWorkflows(program);
}
