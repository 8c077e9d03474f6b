// `svc apps approval-policy set|get|clear APP` and `svc approvals list|respond|link` (CONTRACT 7 and
// 10.4) over the API. A policy is given as JSON (`--policy '{…}'`, or `--file PATH`, `-` for stdin);
// usage errors (exit 2) come before any request; the server's refusal exits 1 with its message.
import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import { seg } from './api-client.ts';
import { group, handle, leaf, str } from './command-kit.ts';
import { UsageError } from './exit-errors.ts';
import { printFields, printJson, printTable, println } from './output.ts';

interface RuleView {
  name: string;
  required: number;
  approvals: Array<{ responded_by: { token_name?: string | null; token_id?: string | null; reason?: string }; at: string }>;
}
interface StepLike {
  step_id: string;
  name: string;
  status: string;
  approval?: { status?: string; rules?: RuleView[]; expires_at?: string | null; decided_by_rule?: string; note?: string } | null;
}
interface Pending {
  workflow: { workflow_id: string; type: string; owner: { name: string | null; id: string } };
  step: StepLike;
}

/** Each rule as "name k/n". */
const rulesText = (rules: RuleView[] | undefined) =>
  rules?.length ? rules.map((r) => `${r.name} ${Math.min(r.approvals.length, r.required)}/${r.required}`).join(', ') : '-';

const who = (by: RuleView['approvals'][number]['responded_by']) =>
  by.token_name ?? by.token_id ?? (by.reason ? `policy (${by.reason})` : '?');

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of process.stdin as AsyncIterable<Buffer | string>) chunks.push(typeof c === 'string' ? Buffer.from(c) : c);
  return Buffer.concat(chunks).toString('utf8');
}

async function policyBody(opts: Record<string, unknown>): Promise<unknown> {
  const inline = str(opts.policy);
  const file = str(opts.file);
  if ((inline === undefined) === (file === undefined))
    throw new UsageError('give the policy as --policy JSON or --file PATH (- for stdin), one of them');
  let text: string;
  try {
    text = inline ?? (file === '-' ? await readStdin() : readFileSync(file!, 'utf8'));
  } catch (err) {
    throw new UsageError(`cannot read --file ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  try {
    return JSON.parse(text);
  } catch {
    throw new UsageError(`the policy is not JSON: ${inline !== undefined ? '--policy' : file}`);
  }
}

export function registerApprovalPolicyCommands(apps: Command): void {
  const policy = group(
    apps,
    'approval-policy',
    "an app's approval policy: who must approve its runs' approval steps, how many, for how long",
  );
  handle(
    leaf(policy, 'set <app_id>', "set an app's approval policy (replaces the one it had; applies to steps still waiting)")
      .option('--policy <json>', 'the policy: {"rules": [{"name", "required", "approvers": {token_ids|token_names|scopes}}], …}')
      .option('--file <path>', 'read the policy JSON from a file (- for stdin)'),
    async (run) => {
      const [app] = run.args;
      const body = await policyBody(run.opts);
      const p = await run.api().request<PolicyView>('PUT', `/v1/apps/${seg(app)}/approval-policy`, body);
      if (run.json) return printJson(p);
      printPolicy(p);
    },
  );
  handle(leaf(policy, 'get <app_id>', "show an app's approval policy"), async (run) => {
    const [app] = run.args;
    const p = await run.api().get<PolicyView>(`/v1/apps/${seg(app)}/approval-policy`);
    if (run.json) return printJson(p);
    printPolicy(p);
  });
  handle(leaf(policy, 'clear <app_id>', "remove an app's approval policy"), async (run) => {
    const [app] = run.args;
    await run.api().del(`/v1/apps/${seg(app)}/approval-policy`);
    if (run.json) return printJson({ cleared: app });
    println(`cleared the approval policy of ${app}`);
  });
}

interface PolicyView {
  rules: Array<{ name: string; required: number; approvers: { token_ids?: string[]; token_names?: string[]; scopes?: string[] } }>;
  prevent_self_approval: boolean;
  expires_after: string | null;
  reject: string;
  auto_approve: string | null;
}

function printPolicy(p: PolicyView): void {
  printFields([
    ['prevent_self_approval', p.prevent_self_approval],
    ['expires_after', p.expires_after ?? '-'],
    ['reject', p.reject],
    ['auto_approve', p.auto_approve ?? '-'],
  ]);
  println();
  printTable(
    ['rule', 'required', 'approvers'],
    p.rules.map((r) => [
      r.name,
      r.required,
      [
        r.approvers.token_ids?.length ? `ids ${r.approvers.token_ids.join(',')}` : '',
        r.approvers.token_names?.length ? `names ${r.approvers.token_names.join(',')}` : '',
        r.approvers.scopes?.length ? `scopes ${r.approvers.scopes.join(',')}` : '',
      ]
        .filter(Boolean)
        .join('; '),
    ]),
  );
}

export function registerApprovalCommands(program: Command): void {
  const approvals = group(program, 'approvals', 'steps awaiting approval: list them, answer them, make one-time links for chat');
  handle(leaf(approvals, 'list', 'list the steps awaiting approval in the org, each rule as k/n'), async (run) => {
    const r = await run.api().get<{ data: Pending[] }>('/v1/approvals');
    if (run.json) return printJson(r);
    printTable(
      ['workflow_id', 'step_id', 'step', 'owner', 'rules', 'expires_at'],
      r.data.map((p) => [
        p.workflow.workflow_id,
        p.step.step_id,
        p.step.name,
        p.workflow.owner.name ?? p.workflow.owner.id,
        rulesText(p.step.approval?.rules),
        p.step.approval?.expires_at ?? '-',
      ]),
      'nothing awaits approval',
    );
  });
  handle(
    leaf(approvals, 'respond <workflow_id> <step_id>', 'approve or reject a step awaiting approval')
      .option('--approve', 'approve it')
      .option('--reject', 'reject it')
      .option('--note <note>', 'a note recorded with the answer'),
    async (run) => {
      const [wf, step] = run.args;
      if (!!run.opts.approve === !!run.opts.reject) throw new UsageError('give one of --approve or --reject');
      const body: Record<string, unknown> = { response: run.opts.approve ? 'approved' : 'rejected' };
      const note = str(run.opts.note);
      if (note !== undefined) body.note = note;
      const s = await run.api().post<StepLike>(`/v1/workflows/${seg(wf)}/steps/${seg(step)}/approval`, body);
      if (run.json) return printJson(s);
      printFields([
        ['step_id', s.step_id],
        ['name', s.name],
        ['status', s.status],
        ['approval', s.approval?.status],
        ['rules', rulesText(s.approval?.rules)],
        ['decided_by_rule', s.approval?.decided_by_rule],
      ]);
      for (const r of s.approval?.rules ?? []) {
        for (const a of r.approvals) println(`  ${r.name}: ${who(a.responded_by)} at ${a.at}`);
      }
    },
  );
  handle(
    leaf(approvals, 'link <workflow_id> <step_id>', 'make a one-time approval link answering as a token (admin), for a chat message')
      .requiredOption('--token-id <token_id>', 'the token the link answers as')
      .option('--expires-in <duration>', 'how long the link is good for, 1m to 7d', '1h'),
    async (run) => {
      const [wf, step] = run.args;
      const r = await run.api().post<{ url: string; expires_at: string }>(`/v1/workflows/${seg(wf)}/steps/${seg(step)}/approval-links`, {
        token_id: str(run.opts.tokenId),
        expires_in: str(run.opts.expiresIn),
      });
      if (run.json) return printJson(r);
      printFields([
        ['url', r.url],
        ['expires_at', r.expires_at],
      ]);
      println('the link works once; it is shown only now');
    },
  );
}
