// `svc listen`: a local webhook receiver for development (like `stripe listen`), on port 9000
// unless --port says otherwise. Prints one line per delivery of at most 160 characters
// (src/cli/listen-line.ts: time, path, short type, subject, sequence, a recovery/resend/example
// mark, what it is about), says when an ordering key's sequence skips, and how to recover the gap; --json prints each whole
// event, --verbose adds the request headers (signatures cut to 8 characters). With --secret (or
// --secret-file) it checks X-Svc-Signature and the Standard Webhooks webhook-signature (either
// secret form; any listed v1 signature may verify), and accepts only a valid webhook-signature
// with a webhook-timestamp within 5 minutes of now (X-Svc-Signature alone signs no time: a replay
// could not be told apart); it answers 401 otherwise, and says which signature(s) verified when
// it is not both with the first listed one. With --forward-to, every accepted delivery is POSTed
// on to that URL with its body and headers unchanged, and the answer's status is printed and
// returned to the sender. With --verdict, it answers a run's verification requests
// (com.svc.rollout.verification.v1, CONTRACT 4.3) with that verdict, so that a walkthrough can gate
// a rollout on it.
import type { VerifyVerdict } from '../domain/verification.ts';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { InvalidArgumentError, type Command } from 'commander';
import {
  checkDelivery,
  SIGNATURE_HEADER,
  signingKeys,
  TIMESTAMP_TOLERANCE_S,
  WEBHOOK_SIGNATURE_HEADER,
  type DeliveryCheck,
} from '../delivery/signing.ts';
import { systemClock, type Clock } from '../domain/clock.ts';
import { readSecret } from './webhook-inputs.ts';
import { UsageError } from './exit-errors.ts';
import { cutEnd, cutMiddle, deliveryLine, deliveryMark, headerLines, MAX_LINE, requestPath, SequenceWatch } from './listen-line.ts';

export interface LineSink {
  write(chunk: string): unknown;
}

export interface ListenerOptions {
  port: number;
  /** Default 127.0.0.1. */
  host?: string;
  /** When set, deliveries must carry a valid X-Svc-Signature or webhook-signature (else 401). */
  secret?: string | null;
  /** POST every accepted delivery on to this URL (body and headers unchanged). */
  forwardTo?: string | null;
  /** How long a forward may take (default 30 s); then the sender gets 504. */
  forwardTimeoutMs?: number;
  /** Print each event as one JSON line instead of a summary line. */
  json?: boolean;
  /** Print the request's headers after each delivery (signature values cut to their first 8 characters). */
  verbose?: boolean;
  /** Where event lines go (default process.stdout). */
  out?: LineSink;
  /** Where diagnostics go (default process.stderr); with json, also the `listening on` line. */
  err?: LineSink;
  /** Largest request body accepted (default 1 MiB). */
  maxBodyBytes?: number;
  /** "Now" of the replay window, and the time a forward may take (default the system clock). */
  clock?: Clock;
  /** Answer verification requests (not forwarded) with 200 `{"verdict": …}`; null: as any event. */
  verdict?: AnswerableVerdict | null;
  /** The webhook that delivers here (--webhook): named in the recovery line of a gap notice. */
  webhookId?: string | null;
}

/** What `--verdict` may answer: a verification verdict (src/domain/verification.ts) but `error`, which is svc's own. */
export const ANSWERABLE_VERDICTS = ['pass', 'fail', 'pending'] as const satisfies readonly VerifyVerdict[];
export type AnswerableVerdict = (typeof ANSWERABLE_VERDICTS)[number];
/** The type of a run's verification request (CONTRACT 6.2). */
const VERIFICATION_TYPE = 'com.svc.rollout.verification.v1';

export interface ReceivedEvent {
  /** The parsed body, or undefined when it is not JSON. */
  event: Record<string, unknown> | undefined;
  raw: Buffer;
  /** The request's headers as received. */
  headers: http.IncomingHttpHeaders;
  /**
   * valid: webhook-signature verified and webhook-timestamp is fresh; invalid: signatures were
   * given and none verified; missing: none was given; stale: webhook-signature verified but
   * webhook-timestamp is not within 5 minutes of now; unprotected: only X-Svc-Signature verified
   * (it signs no time: no replay protection); unchecked: no --secret.
   */
  signature: 'valid' | 'invalid' | 'missing' | 'stale' | 'unprotected' | 'unchecked';
  /** The headers that verified, e.g. ['X-Svc-Signature', 'webhook-signature'] (empty when unchecked). */
  verified: string[];
  /** The status answered to the sender. */
  status: number;
  /** With --forward-to: the forward's answer (status) or why it failed (error). */
  forwarded?: { status?: number; error?: string; duration_ms: number };
}

export interface Listener {
  url: string;
  host: string;
  port: number;
  /** Every request answered so far, in order. */
  received: ReceivedEvent[];
  close(): Promise<void>;
}

const ORDINALS = ['1st', '2nd', '3rd'];
const ordinal = (i: number) => ORDINALS[i] ?? `${i + 1}th`;

/** The headers that verified, e.g. ['X-Svc-Signature', 'webhook-signature (2nd of 2)']. */
export function verifiedHeaders(c: DeliveryCheck): string[] {
  const out: string[] = [];
  if (c.svc === 'valid') out.push(SIGNATURE_HEADER);
  if (c.standard === 'valid')
    out.push(
      c.standardCount > 1 ? `${WEBHOOK_SIGNATURE_HEADER} (${ordinal(c.standardIndex)} of ${c.standardCount})` : WEBHOOK_SIGNATURE_HEADER,
    );
  return out;
}

/** Why a delivery was refused, for its line: each signature header's state, or the timestamp's age. */
function refusal(c: DeliveryCheck, signature: ReceivedEvent['signature']): { mark: string; message: string } {
  if (signature === 'stale') {
    const age = c.ageS === null ? 'not a unix time' : c.ageS >= 0 ? `${c.ageS} s old` : `${-c.ageS} s in the future`;
    return {
      mark: `BAD TIMESTAMP (${age})`,
      message: `webhook-timestamp is more than ${TIMESTAMP_TOLERANCE_S / 60} minutes from now (a replay?)`,
    };
  }
  if (signature === 'unprotected') {
    return {
      mark: `NO REPLAY PROTECTION (${SIGNATURE_HEADER} only)`,
      message:
        `${SIGNATURE_HEADER} alone signs no time, so it could be a replay: ` +
        `a valid ${WEBHOOK_SIGNATURE_HEADER} with webhook-id and webhook-timestamp is required`,
    };
  }
  if (signature === 'missing') return { mark: 'BAD SIGNATURE (missing)', message: `no ${SIGNATURE_HEADER} or ${WEBHOOK_SIGNATURE_HEADER}` };
  const state = `${SIGNATURE_HEADER}: ${c.svc}, ${WEBHOOK_SIGNATURE_HEADER}: ${c.standard}`;
  return { mark: `BAD SIGNATURE (${state})`, message: `no signature matches (${state})` };
}

/**
 * Hop-by-hop headers (RFC 9110 7.6.1) and those the forward sets itself: not copied. Everything
 * else goes on unchanged, in order, names as the sender spelled them.
 */
const NOT_FORWARDED = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'expect',
  'host',
  'content-length',
]);

/** The request's raw headers to forward, as a flat [name, value, …] list. */
export function forwardableHeaders(rawHeaders: string[]): string[] {
  const named = new Set<string>();
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if (rawHeaders[i].toLowerCase() === 'connection') {
      for (const t of rawHeaders[i + 1].split(',')) if (t.trim()) named.add(t.trim().toLowerCase());
    }
  }
  const out: string[] = [];
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i].toLowerCase();
    if (NOT_FORWARDED.has(name) || named.has(name)) continue;
    out.push(rawHeaders[i], rawHeaders[i + 1]);
  }
  return out;
}

interface ForwardResult {
  status?: number;
  contentType?: string;
  body?: Buffer;
  error?: string;
  timedOut?: boolean;
  duration_ms: number;
}

/**
 * POST raw on to url with these headers; never throws. At most MAX_RESPONSE_BYTES of the answer
 * is kept. (undici and the delivery client load only when forwarding: every `svc` command loads
 * this file.)
 */
async function forward(url: string, headers: string[], raw: Buffer, timeoutMs: number, clock: Clock): Promise<ForwardResult> {
  const [{ request }, { MAX_RESPONSE_BYTES }, { describeError }] = await Promise.all([
    import('undici'),
    import('../delivery/client.ts'),
    import('../delivery/attempt-errors.ts'),
  ]);
  const started = performance.now();
  const ms = () => Math.round(performance.now() - started);
  const ac = new AbortController();
  const timer = clock.setTimeout(() => ac.abort(new Error('timeout')), timeoutMs);
  try {
    const res = await request(url, {
      method: 'POST',
      headers,
      body: raw,
      signal: ac.signal,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
    });
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const c of res.body as AsyncIterable<Buffer>) {
      if (size < MAX_RESPONSE_BYTES) chunks.push(c.subarray(0, MAX_RESPONSE_BYTES - size));
      size += c.length;
      if (size >= MAX_RESPONSE_BYTES) {
        res.body.destroy();
        break;
      }
    }
    const ct = res.headers['content-type'];
    return { status: res.statusCode, contentType: Array.isArray(ct) ? ct[0] : ct, body: Buffer.concat(chunks), duration_ms: ms() };
  } catch (err) {
    const timedOut = ac.signal.aborted;
    return { error: timedOut ? `timeout after ${timeoutMs} ms` : describeError(err, timeoutMs), timedOut, duration_ms: ms() };
  } finally {
    timer.cancel();
  }
}

function hostForUrl(host: string): string {
  return host.includes(':') ? `[${host}]` : host;
}

/** What one listener needs to answer a request (its options resolved). */
interface Receiver {
  keys: ReturnType<typeof signingKeys> | null;
  forwardTo: string | null;
  forwardTimeoutMs: number;
  json: boolean;
  verbose: boolean;
  /** The highest sequence seen per ordering key (its warning when one skips). */
  sequences: SequenceWatch;
  out: LineSink;
  errOut: LineSink;
  clock: Clock;
  maxBody: number;
  received: ReceivedEvent[];
  verdict: AnswerableVerdict | null;
}

/** Event lines: stdout, or stderr when stdout carries the JSON lines. */
const note = (r: Receiver, line: string) => (r.json ? r.errOut : r.out).write(`${cutEnd(line, MAX_LINE)}\n`);

function answer(res: http.ServerResponse, status: number, body?: Record<string, unknown>): void {
  if (body) {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  } else {
    res.writeHead(status);
    res.end();
  }
}

/**
 * What verified, for the line: nothing when both headers did with the first listed signature (with
 * --secret every line printed as a delivery verified; the listening line says so), else which did
 * (`verified: webhook-signature (2nd of 2)` in a rotation's overlap).
 */
function verifiedMark(verified: string[]): string {
  if (!verified.length) return '';
  if (verified.length === 2 && verified[0] === SIGNATURE_HEADER && verified[1] === WEBHOOK_SIGNATURE_HEADER) return '';
  return `verified: ${verified.join(', ')}`;
}

/** With --verbose, the request's headers (after its line, or on stderr beside --json). */
function printHeaders(r: Receiver, req: http.IncomingMessage): void {
  if (r.verbose) for (const line of headerLines(req.rawHeaders)) note(r, line);
}

/** Print an accepted delivery, then answer 204 or forward it and answer with the forward's status. */
async function accept(r: Receiver, req: http.IncomingMessage, res: http.ServerResponse, rec: ReceivedEvent, at: number): Promise<void> {
  r.received.push(rec);
  const verdict = r.verdict && rec.event?.type === VERIFICATION_TYPE ? r.verdict : null;
  const mark = deliveryMark(req.headers, rec.event);
  if (r.json) {
    r.out.write(`${JSON.stringify(rec.event)}\n`);
    const verified = rec.verified.length ? `verified: ${rec.verified.join(', ')}` : '';
    if (verified || verdict)
      r.errOut.write(`${String(rec.event?.id ?? '-')}  ${[verified, verdict ? `answered: ${verdict}` : ''].filter(Boolean).join('  ')}\n`);
  } else {
    const trailer = [verifiedMark(rec.verified), verdict ? `answered: ${verdict}` : ''];
    r.out.write(`${deliveryLine({ at, path: requestPath(req.url), event: rec.event, mark, trailer })}\n`);
  }
  printHeaders(r, req);
  r.sequences.see(rec.event, mark !== undefined, r.clock.now());
  if (verdict) {
    rec.status = 200;
    return answer(res, 200, { verdict });
  }
  if (!r.forwardTo) return answer(res, 204);
  const f = await forward(r.forwardTo, forwardableHeaders(req.rawHeaders), rec.raw, r.forwardTimeoutMs, r.clock);
  if (f.status !== undefined) {
    rec.status = f.status;
    rec.forwarded = { status: f.status, duration_ms: f.duration_ms };
    note(r, `  -> ${cutMiddle(r.forwardTo, 96)}: ${f.status} (${f.duration_ms} ms)`);
    res.writeHead(f.status, f.contentType && f.body?.length ? { 'content-type': f.contentType } : {});
    res.end(f.body);
    return;
  }
  rec.status = f.timedOut ? 504 : 502;
  rec.forwarded = { error: f.error, duration_ms: f.duration_ms };
  note(r, `  -> ${cutMiddle(r.forwardTo, 64)}: failed, ${f.error} (answered ${rec.status})`);
  answer(res, rec.status, { error: f.timedOut ? 'gateway_timeout' : 'bad_gateway', message: `forwarding failed: ${f.error}` });
}

/** The body as a JSON object, or undefined when it is not one. */
function parseEvent(raw: Buffer): Record<string, unknown> | undefined {
  try {
    const parsed: unknown = JSON.parse(raw.toString('utf8'));
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) return parsed as Record<string, unknown>;
  } catch {
    // not JSON
  }
  return undefined;
}

/** One whole request body: checked (signatures, JSON), then accepted or refused (401, 400). */
function receive(r: Receiver, req: http.IncomingMessage, res: http.ServerResponse, raw: Buffer): void {
  const at = r.clock.now();
  const event = parseEvent(raw);
  let signature: ReceivedEvent['signature'] = 'unchecked';
  let verified: string[] = [];
  if (r.keys) {
    const c = checkDelivery(r.keys, req.headers, raw, r.clock.now());
    verified = verifiedHeaders(c);
    if (c.ok) signature = 'valid';
    else if (c.standard === 'valid') signature = 'stale';
    else if (c.svc === 'valid') signature = 'unprotected';
    else signature = c.svc === 'missing' && c.standard === 'missing' ? 'missing' : 'invalid';
    if (!c.ok) {
      const why = refusal(c, signature);
      r.received.push({ event, raw, headers: req.headers, signature, verified, status: 401 });
      note(r, deliveryLine({ at, path: requestPath(req.url), event, refusal: why.mark }));
      printHeaders(r, req);
      return answer(res, 401, { error: 'unauthorized', message: why.message });
    }
  }
  if (!event) {
    r.received.push({ event, raw, headers: req.headers, signature, verified, status: 400 });
    r.errOut.write(`rejected a body that is not a JSON object (${raw.length} bytes)\n`);
    return answer(res, 400, { error: 'invalid_request', message: 'body is not a JSON object' });
  }
  const rec: ReceivedEvent = { event, raw, headers: req.headers, signature, verified, status: 204 };
  accept(r, req, res, rec, at).catch((err: unknown) => {
    // accept() and forward() handle their own errors; this is a last line of defence
    r.errOut.write(`internal error: ${err instanceof Error ? err.message : String(err)}\n`);
    if (!res.headersSent) answer(res, 500, { error: 'internal', message: 'listener error' });
  });
}

/** A request: POST only, its body read up to maxBody (413 beyond), then received. */
function handle(r: Receiver, req: http.IncomingMessage, res: http.ServerResponse): void {
  if (req.method !== 'POST') {
    res.setHeader('allow', 'POST');
    return answer(res, 405, { error: 'method_not_allowed', message: 'deliveries are POST requests' });
  }
  const chunks: Buffer[] = [];
  let size = 0;
  req.on('data', (c: Buffer) => {
    size += c.length;
    if (size <= r.maxBody) chunks.push(c);
  });
  req.on('error', () => {});
  req.on('end', () => {
    if (size <= r.maxBody) return receive(r, req, res, Buffer.concat(chunks));
    r.errOut.write(`rejected a request body of ${size} bytes (over ${r.maxBody})\n`);
    answer(res, 413, { error: 'payload_too_large', message: `body over ${r.maxBody} bytes` });
  });
}

/** Start the receiver; resolves once it listens. */
export async function startListener(opts: ListenerOptions): Promise<Listener> {
  const r: Receiver = {
    keys: opts.secret ? signingKeys({ secret: opts.secret }) : null,
    forwardTo: opts.forwardTo ? opts.forwardTo : null,
    forwardTimeoutMs: opts.forwardTimeoutMs ?? 30_000,
    json: Boolean(opts.json),
    verbose: Boolean(opts.verbose),
    sequences: new SequenceWatch(opts.webhookId ?? null),
    out: opts.out ?? process.stdout,
    errOut: opts.err ?? process.stderr,
    clock: opts.clock ?? systemClock,
    maxBody: opts.maxBodyBytes ?? 1024 * 1024,
    received: [],
    verdict: opts.verdict ?? null,
  };
  const server = http.createServer((req, res) => handle(r, req, res));
  server.keepAliveTimeout = 65_000;

  await new Promise<void>((resolve, reject) => {
    const onError = (e: Error) => reject(e);
    server.once('error', onError);
    server.listen(opts.port, opts.host ?? '127.0.0.1', () => {
      server.off('error', onError);
      resolve();
    });
  });
  const addr = server.address() as AddressInfo;
  const url = `http://${hostForUrl(addr.address)}:${addr.port}`;
  const what = [
    r.keys ? `verifying ${SIGNATURE_HEADER} and ${WEBHOOK_SIGNATURE_HEADER}` : '',
    r.forwardTo ? `forwarding to ${r.forwardTo}` : '',
    r.verdict ? `answering verification requests: ${r.verdict}` : '',
  ].filter(Boolean);
  (r.json ? r.errOut : r.out).write(`listening on ${url}${what.length ? ` (${what.join('; ')})` : ''}\n`);
  // sequences still not seen GAP_WAIT_MS after a later one came: said once each
  const gaps = r.clock.setInterval(() => {
    for (const line of r.sequences.due(r.clock.now())) note(r, line);
  }, GAP_CHECK_MS);

  let closing: Promise<void> | null = null;
  return {
    url,
    host: addr.address,
    port: addr.port,
    received: r.received,
    close() {
      gaps.cancel();
      closing ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
        // a real second for open connections to finish, whatever clock the replay window reads
        systemClock.setTimeout(() => server.closeAllConnections(), 1000);
      });
      return closing;
    },
  };
}

/** How often listen looks for gaps that have waited long enough (src/cli/listen-line.ts GAP_WAIT_MS). */
const GAP_CHECK_MS = 500;

/** `svc listen`'s port when --port is not given (CONTRACT 7, new in 0.3). */
export const DEFAULT_PORT = 9000;

/** A port that cannot be had, said in one line that names it and --port (exit 1); null for another error. */
function portError(err: unknown, port: number): Error | null {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  if (code === 'EADDRINUSE') return new Error(`port ${port} is in use; pick another with --port`);
  if (code === 'EACCES') return new Error(`port ${port} is not allowed here (permission denied); pick another with --port`);
  return null;
}

function parseVerdict(v: string): AnswerableVerdict {
  if (!(ANSWERABLE_VERDICTS as readonly string[]).includes(v)) throw new InvalidArgumentError(`one of ${ANSWERABLE_VERDICTS.join(', ')}`);
  return v as AnswerableVerdict;
}

function parsePort(v: string): number {
  if (!/^\d+$/.test(v) || Number(v) > 65535) throw new InvalidArgumentError('a port number from 0 to 65535');
  return Number(v);
}

function parseForwardUrl(v: string): string {
  let u: URL;
  try {
    u = new URL(v);
  } catch {
    throw new InvalidArgumentError('an absolute http or https URL');
  }
  if ((u.protocol !== 'http:' && u.protocol !== 'https:') || !u.host) throw new InvalidArgumentError('an absolute http or https URL');
  return v;
}

export function registerListenCommand(program: Command): void {
  program
    .command('listen')
    .description(
      'run a local webhook receiver that prints one line (at most 160 characters) per delivered event ' +
        '(verifies signatures with --secret; forwards with --forward-to)',
    )
    .option('--port <port>', 'port to listen on (0 picks a free one)', parsePort, DEFAULT_PORT)
    .option('--host <host>', 'address to bind', '127.0.0.1')
    .option(
      '--secret <secret>',
      'the webhook secret (plain or whsec_…): reject (401) deliveries without a valid webhook-signature ' +
        'and a webhook-timestamp within 5 minutes of now (X-Svc-Signature alone has no replay protection)',
    )
    .option(
      '--secret-file <path>',
      'read the secret from a file (- = stdin; one trailing newline dropped), so it stays out of the process list',
    )
    .option(
      '--forward-to <url>',
      'POST every accepted delivery on to this URL (body and headers unchanged) and answer with its status',
      parseForwardUrl,
    )
    .option('--json', 'print each whole event as one JSON line')
    .option('--webhook <id>', 'the webhook that delivers here: named in the recovery command printed for a gap')
    .option('--verbose', 'print the request headers after each delivery (signature values cut to their first 8 characters)')
    .option(
      '--verdict <verdict>',
      `answer a run's verification requests (${VERIFICATION_TYPE}) with this verdict: ${ANSWERABLE_VERDICTS.join(', ')}`,
      parseVerdict,
    )
    .action(async (_opts: unknown, cmd: Command) => {
      const local = cmd.opts<{
        port: number;
        host: string;
        secret?: string;
        secretFile?: string;
        forwardTo?: string;
        json?: boolean;
        verbose?: boolean;
        verdict?: AnswerableVerdict;
        webhook?: string;
      }>();
      const globals = cmd.optsWithGlobals<{ json?: boolean }>();
      if (local.secret !== undefined && local.secretFile !== undefined)
        throw new UsageError('--secret and --secret-file are mutually exclusive: give the secret one way');
      const secret = (await readSecret(local)) ?? process.env.SVC_LISTEN_SECRET ?? null;
      // handlers first, so that a signal arriving while the server starts still ends it cleanly
      let stop!: () => void;
      const stopped = new Promise<void>((resolve) => {
        stop = () => {
          process.off('SIGINT', stop);
          process.off('SIGTERM', stop);
          resolve();
        };
      });
      process.on('SIGINT', stop);
      process.on('SIGTERM', stop);
      let listener: Listener;
      try {
        listener = await startListener({
          port: local.port,
          host: local.host,
          secret,
          forwardTo: local.forwardTo ?? null,
          json: Boolean(local.json || globals.json),
          verbose: Boolean(local.verbose),
          verdict: local.verdict ?? null,
          webhookId: local.webhook ?? null,
        });
      } catch (err) {
        stop();
        throw portError(err, local.port) ?? err;
      }
      await stopped;
      await listener.close();
    });
}
