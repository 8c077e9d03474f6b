// `svc listen`: a local webhook receiver for development (like `stripe listen`). Prints one line
// per delivered event; with --secret it checks X-Svc-Signature and answers 401 on a mismatch.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { InvalidArgumentError, type Command } from 'commander';
import { verify } from '../delivery/sign.ts';

export interface LineSink {
  write(chunk: string): unknown;
}

export interface ListenerOptions {
  port: number;
  /** Default 127.0.0.1. */
  host?: string;
  /** When set, deliveries must carry a valid X-Svc-Signature (else 401). */
  secret?: string | null;
  /** Print each event as one JSON line instead of a summary line. */
  json?: boolean;
  /** Where event lines go (default process.stdout). */
  out?: LineSink;
  /** Where diagnostics go (default process.stderr); with json, also the `listening on` line. */
  err?: LineSink;
  /** Largest request body accepted (default 1 MiB). */
  maxBodyBytes?: number;
}

export interface ReceivedEvent {
  /** The parsed body, or undefined when it is not JSON. */
  event: Record<string, unknown> | undefined;
  raw: Buffer;
  signature: 'valid' | 'invalid' | 'missing' | 'unchecked';
  status: number;
}

export interface Listener {
  url: string;
  host: string;
  port: number;
  /** Every request answered so far, in order. */
  received: ReceivedEvent[];
  close(): Promise<void>;
}

/** The summary line of an event: time, type, subject, interest slugs. */
export function formatEventLine(ev: Record<string, unknown> | undefined, mark?: string): string {
  const str = (v: unknown) => (typeof v === 'string' && v ? v : '-');
  const slugs = Array.isArray(ev?.interests) ? (ev.interests as unknown[]).map(String).join(' ') : '';
  const parts = [str(ev?.time ?? new Date().toISOString()), str(ev?.type), str(ev?.subject)];
  if (slugs) parts.push(`[${slugs}]`);
  if (mark) parts.unshift(mark);
  return parts.join('  ');
}

function hostForUrl(host: string): string {
  return host.includes(':') ? `[${host}]` : host;
}

/** Start the receiver; resolves once it listens. */
export async function startListener(opts: ListenerOptions): Promise<Listener> {
  const host = opts.host ?? '127.0.0.1';
  const out = opts.out ?? process.stdout;
  const errOut = opts.err ?? process.stderr;
  const secret = opts.secret ? opts.secret : null;
  const maxBody = opts.maxBodyBytes ?? 1024 * 1024;
  const received: ReceivedEvent[] = [];

  const answer = (res: http.ServerResponse, status: number, body?: Record<string, unknown>) => {
    if (body) {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    } else {
      res.writeHead(status);
      res.end();
    }
  };

  const server = http.createServer((req, res) => {
    if (req.method !== 'POST') {
      res.setHeader('allow', 'POST');
      return answer(res, 405, { error: 'method_not_allowed', message: 'deliveries are POST requests' });
    }
    const chunks: Buffer[] = [];
    let size = 0;
    let tooLarge = false;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > maxBody) tooLarge = true;
      else chunks.push(c);
    });
    req.on('error', () => {});
    req.on('end', () => {
      if (tooLarge) {
        errOut.write(`rejected a request body of ${size} bytes (over ${maxBody})\n`);
        return answer(res, 413, { error: 'payload_too_large', message: `body over ${maxBody} bytes` });
      }
      const raw = Buffer.concat(chunks);
      let event: Record<string, unknown> | undefined;
      try {
        const parsed: unknown = JSON.parse(raw.toString('utf8'));
        if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) event = parsed as Record<string, unknown>;
      } catch {
        event = undefined;
      }
      let signature: ReceivedEvent['signature'] = 'unchecked';
      if (secret) {
        const header = req.headers['x-svc-signature'];
        signature = header === undefined ? 'missing' : verify(secret, raw, header) ? 'valid' : 'invalid';
      }
      if (signature === 'missing' || signature === 'invalid') {
        const mark = signature === 'missing' ? 'BAD SIGNATURE (missing)' : 'BAD SIGNATURE';
        received.push({ event, raw, signature, status: 401 });
        if (opts.json) errOut.write(`${formatEventLine(event, mark)}\n`);
        else out.write(`${formatEventLine(event, mark)}\n`);
        return answer(res, 401, { error: 'unauthorized', message: 'X-Svc-Signature does not match' });
      }
      if (!event) {
        received.push({ event, raw, signature, status: 400 });
        errOut.write(`rejected a body that is not a JSON object (${raw.length} bytes)\n`);
        return answer(res, 400, { error: 'invalid_request', message: 'body is not a JSON object' });
      }
      received.push({ event, raw, signature, status: 204 });
      out.write(opts.json ? `${JSON.stringify(event)}\n` : `${formatEventLine(event)}\n`);
      answer(res, 204);
    });
  });
  server.keepAliveTimeout = 65_000;

  await new Promise<void>((resolve, reject) => {
    const onError = (e: Error) => reject(e);
    server.once('error', onError);
    server.listen(opts.port, host, () => {
      server.off('error', onError);
      resolve();
    });
  });
  const addr = server.address() as AddressInfo;
  const url = `http://${hostForUrl(addr.address)}:${addr.port}`;
  (opts.json ? errOut : out).write(`listening on ${url}${secret ? ' (verifying X-Svc-Signature)' : ''}\n`);

  let closing: Promise<void> | null = null;
  return {
    url,
    host: addr.address,
    port: addr.port,
    received,
    close() {
      closing ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
        setTimeout(() => server.closeAllConnections(), 1000).unref();
      });
      return closing;
    },
  };
}

function parsePort(v: string): number {
  if (!/^\d+$/.test(v) || Number(v) > 65535) throw new InvalidArgumentError('a port number from 0 to 65535');
  return Number(v);
}

export function registerListenCommand(program: Command): void {
  program
    .command('listen')
    .description('run a local webhook receiver that prints every delivered event (verifies X-Svc-Signature with --secret)')
    .requiredOption('--port <port>', 'port to listen on (0 picks a free one)', parsePort)
    .option('--host <host>', 'address to bind', '127.0.0.1')
    .option('--secret <secret>', 'the webhook secret: reject (401) deliveries whose X-Svc-Signature does not match')
    .option('--json', 'print each event as one JSON line')
    .action(async (_opts: unknown, cmd: Command) => {
      const local = cmd.opts<{ port: number; host: string; secret?: string; json?: boolean }>();
      const globals = cmd.optsWithGlobals<{ json?: boolean }>();
      const secret = local.secret ?? process.env.SVC_LISTEN_SECRET ?? null;
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
        listener = await startListener({ port: local.port, host: local.host, secret, json: Boolean(local.json || globals.json) });
      } catch (err) {
        stop();
        throw err;
      }
      await stopped;
      await listener.close();
    });
}
