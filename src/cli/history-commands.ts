// The history commands of `svc` (CONTRACT 7, 4.5): `svc events list|get`, and on a webhook
// `attempts`, `recover` (followed to done with a progress line) and `resend`.
import type { Command } from 'commander';
import { seg } from './api-client.ts';
import { group, handle, leaf, reportAttempt, str, type AttemptNow, type Run } from './command-kit.ts';
import { UsageError } from './exit-errors.ts';
import { printFields, printJson, printTable, println } from './output.ts';
import { foregroundClock as clock, sleep } from '../domain/clock.ts';
import { timeBoundMs } from '../domain/duration.ts';
import type { AuditView } from '../services/audit.ts';
import type { AttemptView as Attempt, Page, RecoveryView as Recovery } from '../services/history.ts';

const WEBHOOKS = '/v1/orgs/current/webhooks';
const PAGE = 500;
/** How often `recover` asks how far the recovery has come. */
const FOLLOW_EVERY_MS = 500;
/** A recovery whose counts have not moved for this long is left (exit 1): its last counts may have been lost to a crash. */
const STALLED_MS = 120_000;

interface CloudEvent {
  id: string;
  type: string;
  subject?: string;
  time?: string;
  sequence?: string;
}

/** `--after-sequence`/`--until-sequence`: a whole number; checked before any request (exit 2). */
function sequenceOption(run: Run, flag: string, name: 'afterSequence' | 'untilSequence'): number | undefined {
  const v = str(run.opts[name]);
  if (v === undefined) return undefined;
  if (/^\d{1,15}$/.test(v.trim())) return Number(v.trim());
  throw new UsageError(`--${flag} ${JSON.stringify(v)}: a whole number (a sequence of the ordering key)`);
}

/**
 * The time window of a history command: `--since` (and `--until`) of what it lists, each an ISO
 * 8601 time or a duration back from now; read with timeOption.
 */
function timeWindow(cmd: Command, what: string, o: { until?: boolean; required?: boolean } = {}): Command {
  cmd.option('--since <time>', `${what} at or after: ISO 8601 or a duration back from now (2h, 7d)${o.required ? '; required' : ''}`);
  return o.until === false ? cmd : cmd.option('--until <time>', `${what} before: ISO 8601 or a duration back from now`);
}

/** `--since`/`--until`: an ISO 8601 time or a duration back from now; checked before any request (exit 2). */
function timeOption(run: Run, name: 'since' | 'until'): string | undefined {
  const v = str(run.opts[name]);
  if (v === undefined) return undefined;
  if (timeBoundMs(v, Date.now()) !== null) return v.trim();
  throw new UsageError(`--${name} ${JSON.stringify(v)}: an ISO 8601 time or a duration back from now (e.g. 2h, 30m, 7d)`);
}

function query(params: Record<string, string | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined) q.set(k, v);
  const s = q.toString();
  return s ? `?${s}` : '';
}

/**
 * Events and audit rows as a person reads them (CONTRACT 7): newest first, `--oldest-first` the API's
 * order (CONTRACT 4.5 lists them oldest first, so every page is read and the whole list turned).
 */
function newestFirst<T>(run: Run, list: T[]): T[] {
  return run.opts.oldestFirst === true ? list : list.reverse();
}

/** Text from a receiver, safe on a terminal: control characters (but newline and tab) shown as `?`. */
function printable(text: string): string {
  return text.replace(/[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]/g, '?');
}

/** One attempt with what it sent and what the receiver answered (`svc webhooks attempts ID --show`). */
function printExchange(a: Attempt): void {
  const lines: string[] = [];
  const via = a.recovery_id ? `  via ${a.recovery_id}` : '';
  lines.push(`${a.attempted_at}  ${a.outcome}  ${a.status_code ?? '-'}  ${a.duration_ms} ms  ${a.event_id}  ${a.type}${via}`);
  if (a.error) lines.push(`  error: ${printable(a.error)}`);
  if (a.request === undefined && a.response === undefined) {
    lines.push('  (request and response not shown by this server)');
  } else if (!a.request && !a.response) {
    lines.push('  (request and response not kept: an attempt made before svc 0.3, or none was sent)');
  } else {
    lines.push('  request headers:');
    if (a.request) for (const [k, v] of Object.entries(a.request.headers)) lines.push(`    ${k}: ${printable(v)}`);
    else lines.push('    (not kept)');
    const r = a.response;
    if (!r) lines.push('  response: none (no answer came)');
    else {
      lines.push(`  response: ${r.status}`);
      lines.push(`  response headers${r.headers_truncated ? ' (cut at 8 KiB)' : ''}:`);
      for (const [k, v] of Object.entries(r.headers)) lines.push(`    ${k}: ${printable(v)}`);
      const how = [r.body_encoding === 'base64' ? 'base64' : '', r.body_truncated ? 'first 4 KiB' : ''].filter(Boolean).join(', ');
      lines.push(`  response body${how ? ` (${how})` : ''}:${r.body ? '' : ' (empty)'}`);
      if (r.body) for (const l of printable(r.body).split('\n')) lines.push(`    ${l}`);
    }
  }
  println(`${lines.join('\n')}\n`);
}

/** Every page of a list. */
async function allPages<T>(run: Run, path: string, params: Record<string, string | undefined>): Promise<T[]> {
  const out: T[] = [];
  let after: string | undefined;
  do {
    const page = await run.api().get<Page<T>>(`${path}${query({ ...params, limit: String(PAGE), after })}`);
    out.push(...page.data);
    after = page.next_cursor ?? undefined;
  } while (after);
  return out;
}

/** A list of records kept for a while (the audit log, events): --since and --until, --oldest-first. */
function windowLeaf(parent: Command, name: string, description: string, what: string): Command {
  return timeWindow(leaf(parent, name, description), what).option('--oldest-first', 'oldest first (also with --json)');
}

/** Every page of such a list (--since, --until and the filters given), in the order asked for. */
async function windowList<T>(run: Run, path: string, filters: Record<string, string | undefined>): Promise<T[]> {
  return newestFirst(run, await allPages<T>(run, path, { since: timeOption(run, 'since'), until: timeOption(run, 'until'), ...filters }));
}

export function registerHistoryCommands(program: Command, webhooks: Command): void {
  registerAuditCommands(program);
  registerEventCommands(program);
  registerWebhookHistoryCommands(webhooks);
}

/** `svc audit list`. */
function registerAuditCommands(program: Command): void {
  const audit = group(program, 'audit', "the org's audit log: who changed what (an admin token; kept for --audit-retention)");
  handle(
    windowLeaf(audit, 'list', 'list the changes made, newest first, with their actor', 'made')
      .option('--actor <token_id>', 'only the changes made with this token')
      .option('--action <action>', 'only this operation (webhooks.create, rollbacks.create, steps.approve, …)')
      .option('--resource-id <id>', 'only the changes to this resource'),
    async (run) => {
      const list = await windowList<AuditView>(run, '/v1/audit', {
        actor: str(run.opts.actor),
        action: str(run.opts.action),
        resource_id: str(run.opts.resourceId),
      });
      if (run.json) return printJson(list);
      printTable(
        ['at', 'actor', 'action', 'resource', 'status'],
        list.map((e) => [
          e.at,
          e.actor.token_name ?? e.actor.token_id ?? '—',
          e.action,
          e.resource_id ?? '—',
          e.status === null ? '—' : String(e.status),
        ]),
        'no changes',
      );
    },
  );
}

/** `svc events list|get`. */
function registerEventCommands(program: Command): void {
  const events = group(program, 'events', "the org's event history (kept for --event-retention)");

  handle(
    windowLeaf(events, 'list', 'list kept events, newest first', 'emitted')
      .option('--type <type>', 'only this CloudEvents type')
      .option('--subject-prefix <prefix>', 'only subjects starting with this')
      .option('--order-key <key>', "only this ordering key's events (an install, workflow, runner or webhook id), in sequence order")
      .option('--after-sequence <n>', 'with --order-key: only those whose sequence is above n'),
    async (run) => {
      const key = str(run.opts.orderKey);
      const after = sequenceOption(run, 'after-sequence', 'afterSequence');
      if (after !== undefined && key === undefined) throw new UsageError('--after-sequence goes with --order-key');
      const filters = { type: str(run.opts.type), subject_prefix: str(run.opts.subjectPrefix) };
      // one key's events read in sequence order (CONTRACT 10.1), as a receiver applies them
      const list =
        key === undefined
          ? await windowList<CloudEvent>(run, '/v1/events', filters)
          : await allPages<CloudEvent>(run, '/v1/events', {
              since: timeOption(run, 'since'),
              until: timeOption(run, 'until'),
              ...filters,
              order_key: key,
              after_sequence: after === undefined ? undefined : String(after),
            });
      if (run.json) return printJson(list);
      printTable(
        key === undefined ? ['time', 'type', 'subject', 'id'] : ['sequence', 'time', 'type', 'subject', 'id'],
        list.map((e) => (key === undefined ? [e.time, e.type, e.subject, e.id] : [Number(e.sequence), e.time, e.type, e.subject, e.id])),
        'no events',
      );
    },
  );

  handle(leaf(events, 'get <event_id>', 'one kept event, as delivered (JSON)'), async (run) => {
    const [id] = run.args;
    printJson(await run.api().get(`/v1/events/${seg(id)}`));
  });

  handle(
    leaf(events, 'recipients <event_id>', "which of the org's webhooks the event goes to now, and what decided (interests, match, filter)"),
    async (run) => {
      const [id] = run.args;
      const r = await run
        .api()
        .get<{ data: Array<{ webhook_id: string; matched: boolean; decided_by: string }> }>(`/v1/events/${seg(id)}/recipients`);
      if (run.json) return printJson(r);
      printTable(
        ['webhook_id', 'matched', 'decided_by'],
        r.data.map((x) => [x.webhook_id, x.matched ? 'yes' : 'no', x.decided_by]),
        'no webhooks',
      );
    },
  );
}

/** On a webhook: `attempts`, `recover` and `resend`. */
function registerWebhookHistoryCommands(webhooks: Command): void {
  handle(
    timeWindow(
      leaf(webhooks, 'attempts <webhook_id>', "a webhook's delivery attempts, newest first")
        .option('--failed', 'only the failed ones')
        .option(
          '--show',
          'each with the request headers svc sent (signatures cut to 8 characters) and what the receiver answered: ' +
            'status, headers, first 4 KiB of the body',
        ),
      'made',
      { until: false },
    ),
    async (run) => {
      const [id] = run.args;
      const show = run.opts.show === true;
      const list = await allPages<Attempt>(run, `${WEBHOOKS}/${seg(id)}/attempts`, {
        since: timeOption(run, 'since'),
        outcome: run.opts.failed === true ? 'failure' : undefined,
        include: show ? 'request,response' : undefined,
      });
      if (run.json) return printJson(list);
      if (show) {
        if (!list.length) return println('no attempts');
        for (const a of list) printExchange(a);
        return;
      }
      printTable(
        ['attempted_at', 'outcome', 'status', 'ms', 'event_id', 'type', 'recovery', 'error'],
        list.map((a) => [a.attempted_at, a.outcome, a.status_code, a.duration_ms, a.event_id, a.type, a.recovery_id, a.error]),
        'no attempts',
      );
    },
  );

  handle(
    timeWindow(
      leaf(
        webhooks,
        'recover <webhook_id>',
        'attempt again at this webhook the kept events of a window it missed, and follow the recovery to done',
      ),
      'events emitted',
    )
      .option('--order-key <key>', "instead of --since: a gap of this ordering key's events (CONTRACT 10.1), with --after-sequence")
      .option('--after-sequence <n>', 'with --order-key: the events whose sequence is above n')
      .option('--until-sequence <n>', 'with --order-key: ... and at most n (inclusive)')
      .option('--all', 'every matching event of the window, not only those that never got through')
      .option('--backfill', 'events emitted before the webhook was created too'),
    async (run) => {
      const [id] = run.args;
      const since = timeOption(run, 'since');
      const until = timeOption(run, 'until');
      const key = str(run.opts.orderKey);
      const afterSeq = sequenceOption(run, 'after-sequence', 'afterSequence');
      const untilSeq = sequenceOption(run, 'until-sequence', 'untilSequence');
      const body: Record<string, unknown> = {};
      if (key !== undefined) {
        if (since !== undefined || until !== undefined) throw new UsageError('--order-key takes --after-sequence, not --since or --until');
        if (afterSeq === undefined) throw new UsageError('--order-key needs --after-sequence (the last sequence received before the gap)');
        Object.assign(body, { order_key: key, after_sequence: afterSeq }, untilSeq === undefined ? {} : { until_sequence: untilSeq });
      } else {
        if (afterSeq !== undefined || untilSeq !== undefined)
          throw new UsageError('--after-sequence and --until-sequence go with --order-key');
        if (since === undefined) throw new UsageError('--since is required (e.g. --since 2h), or --order-key with --after-sequence');
        body.since = since;
        if (until !== undefined) body.until = until;
      }
      if (run.opts.all === true) body.only_failed = false;
      if (run.opts.backfill === true) body.backfill = true;
      const started = await run.api().post<{ recovery_id: string; events: number }>(`${WEBHOOKS}/${seg(id)}/recover`, body);
      if (!run.json) println(`recovery ${started.recovery_id}: ${started.events} event${started.events === 1 ? '' : 's'} to attempt`);
      await followRecovery(run, id, `${WEBHOOKS}/${seg(id)}/recoveries/${seg(started.recovery_id)}`);
    },
  );

  handle(
    leaf(webhooks, 'resend <webhook_id> <event_id>', 'send one kept event to this webhook now (exit 1 when it is not delivered)'),
    async (run) => {
      const [id, eventId] = run.args;
      reportAttempt(run, await run.api().post<AttemptNow>(`${WEBHOOKS}/${seg(id)}/resend`, { event_id: eventId }), 'the event');
    },
  );
}

/**
 * Follow a recovery to done: a line each time its counts move, then its summary (with --json, only
 * the recovery as the API answers it). Left (exit 1) once it has not moved for STALLED_MS.
 */
async function followRecovery(run: Run, id: string, path: string): Promise<void> {
  let last = '';
  let movedAt = clock.now();
  for (;;) {
    const r = await run.api().get<Recovery>(path);
    const line = `${r.attempted}/${r.events} attempted, ${r.succeeded} succeeded, ${r.failed} failed`;
    if (line !== last) {
      if (!run.json) println(line);
      movedAt = clock.now();
    }
    last = line;
    if (r.state !== 'done' && clock.now() - movedAt > STALLED_MS) {
      // counts are written once a second: a kill -9 of svc may lose the last second's (the attempts are made)
      throw new Error(`recovery ${r.recovery_id} has not moved for ${STALLED_MS / 1000} s (${line}); see svc webhooks attempts ${id}`);
    }
    if (r.state === 'done') {
      if (run.json) return printJson(r);
      printFields([
        ['recovery_id', r.recovery_id],
        ['state', r.state],
        ['events', r.events],
        ['succeeded', r.succeeded],
        ['failed', r.failed],
      ]);
      return;
    }
    await sleep(clock, FOLLOW_EVERY_MS);
  }
}
