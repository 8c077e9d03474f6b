// `svc produce health|workflow …` (CONTRACT 7, 5.2): send one producer fact from a shell, as a NATS
// request on `svc.ingest.<org>.…` with the reply inbox `_INBOX_<org>`, and print the engine's answer,
// so that a walkthrough (a health verdict during a bake) needs no NATS tool. Exit 0 when the engine
// answers `{"ok": true}`, 1 when it refuses the fact or does not answer, 2 for a usage error.
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { Option, type Command } from 'commander';
import { NatsSetupError } from '../bus/nats/nats-creds.ts';
import { natsConnectOptions } from '../bus/nats/nats-auth.ts';
import { ingestSubject, isSafeToken, producerInboxPrefix, type IngestFamily } from '../bus/subjects.ts';
import { durationMs } from '../domain/duration.ts';
import { UsageError } from './exit-errors.ts';

const VERDICTS = ['healthy', 'degraded', 'unhealthy', 'unknown'];

interface ProduceOptions {
  nats?: string;
  natsCreds?: string;
  org?: string;
  timeout: string;
  json?: boolean;
}

/** The options every `svc produce` command takes. */
function withProducerOptions(cmd: Command): Command {
  return cmd
    .addOption(new Option('--nats <url>', 'NATS server URL of svc serve').env('SVC_NATS_URL'))
    .addOption(
      new Option('--nats-creds <file>', "the org's producer credentials (svc nats creds); none when the server needs none").env(
        'SVC_NATS_CREDS',
      ),
    )
    .addOption(new Option('--org <org_id>', 'the org the fact belongs to').env('SVC_ORG_ID'))
    .option('--timeout <duration>', 'how long to wait for the answer', '5s')
    .option('--json', 'print only the answer, as JSON');
}

/** A JSON document given inline, as @FILE, or as - (stdin). */
function readJsonArg(text: string, what: string): unknown {
  let raw = text;
  try {
    if (text === '-') raw = readFileSync(0, 'utf8');
    else if (text.startsWith('@')) raw = readFileSync(text.slice(1), 'utf8');
  } catch (err) {
    throw new UsageError(`${what}: cannot read ${text === '-' ? 'stdin' : text.slice(1)} (${(err as Error).message})`);
  }
  try {
    return JSON.parse(raw);
  } catch {
    throw new UsageError(`${what} is not JSON`);
  }
}

/** Send `payload` as a request on the org's ingest subject and report the answer. */
async function produce(opts: ProduceOptions, family: IngestFamily, id: string, payload: unknown): Promise<void> {
  if (!opts.nats) throw new UsageError('svc produce needs --nats <url> (or SVC_NATS_URL): the NATS server svc serve uses');
  if (!opts.org) throw new UsageError('svc produce needs --org <org_id> (or SVC_ORG_ID)');
  if (!isSafeToken(opts.org)) throw new UsageError(`--org ${JSON.stringify(opts.org)} is not an org id`);
  if (!isSafeToken(id)) throw new UsageError(`${JSON.stringify(id)} is not an id (1 to 64 of a-z, 0-9 and _)`);
  const timeout = durationMs(opts.timeout);
  if (timeout === null || timeout < 1 || timeout > 600_000)
    throw new UsageError(`--timeout ${JSON.stringify(opts.timeout)}: a duration from 1ms to 10m (e.g. 5s)`);
  const subject = ingestSubject(opts.org, family, id);
  let options;
  try {
    options = natsConnectOptions({
      servers: [opts.nats],
      name: 'svc-produce',
      credsFile: opts.natsCreds ?? null,
      role: 'producer',
      org: opts.org,
    });
  } catch (err) {
    if (err instanceof NatsSetupError) throw new UsageError(err.message);
    throw err;
  }
  let nc: NatsConnection;
  try {
    nc = await connect({ ...options, reconnect: false, timeout: Math.min(timeout, 5000) });
  } catch (err) {
    throw new Error(`cannot reach NATS at ${opts.nats} (${(err as Error).message})`);
  }
  let answer: unknown;
  try {
    // the engine answers only a reply subject under the org's own inbox prefix (CONTRACT 5.2)
    const reply = `${producerInboxPrefix(opts.org)}.${randomBytes(9).toString('hex')}`;
    const msg = await nc.request(subject, JSON.stringify(payload), { timeout, noMux: true, reply });
    const text = msg.string();
    try {
      answer = JSON.parse(text);
    } catch {
      answer = text;
    }
  } catch (err) {
    const e = err as Error;
    const why = /no responders|503/i.test(`${e.message} ${(e as { code?: string }).code ?? ''}`)
      ? 'nobody answers it: is svc serve running with this --nats?'
      : /timeout/i.test(`${e.name} ${e.message}`)
        ? `no answer within ${opts.timeout}`
        : e.message;
    throw new Error(`${subject}: ${why}`);
  } finally {
    await nc.close().catch(() => undefined);
  }
  const ok = !!answer && typeof answer === 'object' && (answer as { ok?: unknown }).ok === true;
  if (opts.json) process.stdout.write(`${JSON.stringify(answer)}\n`);
  else process.stdout.write(`${subject}: ${JSON.stringify(answer)}\n`);
  if (!ok) process.exitCode = 1;
}

export function registerProduceCommands(program: Command): void {
  const group = program
    .command('produce')
    .description('send a producer fact (CONTRACT 5.2) over NATS and print the answer: a health verdict, a workflow or step transition');

  withProducerOptions(
    group
      .command('health <install_id>')
      .description("a health checker's verdict on a component of an install")
      .requiredOption('--component <component_id>', 'the component')
      .requiredOption('--verdict <verdict>', VERDICTS.join(' | '))
      .option('--reason <text>', 'why (shown in the events and a tripped health gate)'),
  ).action(async (installId: string, opts: ProduceOptions & { component: string; verdict: string; reason?: string }) => {
    if (!VERDICTS.includes(opts.verdict)) throw new UsageError(`--verdict ${JSON.stringify(opts.verdict)}: one of ${VERDICTS.join(', ')}`);
    const payload: Record<string, unknown> = { component_id: opts.component, verdict: opts.verdict };
    if (opts.reason !== undefined) payload.reason = opts.reason;
    await produce(opts, 'health', installId, payload);
  });

  withProducerOptions(
    group
      .command('workflow <workflow_id>')
      .description('a workflow or step transition of a workflow that svc did not start')
      .requiredOption(
        '--data <json>',
        'the message: {kind, transition, workflow, step?, error?, duration_ms?} inline, @FILE, or - (stdin)',
      ),
  ).action(async (workflowId: string, opts: ProduceOptions & { data: string }) => {
    const payload = readJsonArg(opts.data, '--data');
    if (!payload || typeof payload !== 'object' || Array.isArray(payload)) throw new UsageError('--data must be a JSON object');
    await produce(opts, 'workflows', workflowId, payload);
  });
}
