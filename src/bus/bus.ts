/**
 * The message bus: core pub/sub + request/reply for jobs, ingest and control messages. Two
 * implementations: the in-process bus (memory.ts, used by `npm start`) and NATS
 * (nats/nats-connection.ts), whose connection also carries JetStream (nats/jetstream.ts). Subjects
 * come from subjects.ts only.
 */

export interface BusMessage {
  subject: string;
  data: Uint8Array;
  reply?: string;
  json<T = unknown>(): T;
  /** Answers a request; false when the message has no reply subject. */
  respond(data: Uint8Array | string): boolean;
}

export interface Subscription {
  unsubscribe(): void;
  /**
   * Stops taking messages (the server routes later ones elsewhere, or finds no responder) and
   * resolves once every message already received has been handed to the handler.
   */
  drain(): Promise<void>;
}

export interface Bus {
  readonly kind: 'memory' | 'nats';
  publish(subject: string, data: Uint8Array | string): void;
  /** `*` and `>` wildcards; with `queue`, one member of the group gets each message. */
  subscribe(subject: string, handler: (msg: BusMessage) => void | Promise<void>, opts?: { queue?: string }): Subscription;
  /** Rejects with a {@link BusRequestError} on timeout or when nobody subscribes. */
  request(subject: string, data: Uint8Array | string, opts?: { timeoutMs?: number }): Promise<BusMessage>;
  flush(): Promise<void>;
  /** Drains: stops consuming, lets in-flight handlers finish, then closes. */
  close(): Promise<void>;
}

export interface BusLogger {
  warn(o: object, m?: string): void;
}

export type BusRequestErrorCode = 'timeout' | 'no_responders' | 'closed' | 'failed';

/** The error `Bus.request` rejects with. */
export class BusRequestError extends Error {
  readonly code: BusRequestErrorCode;
  readonly subject: string;
  constructor(code: BusRequestErrorCode, subject: string, message?: string, options?: { cause?: unknown }) {
    super(message ?? defaultMessage(code, subject), options);
    this.name = 'BusRequestError';
    this.code = code;
    this.subject = subject;
  }
}

function defaultMessage(code: BusRequestErrorCode, subject: string): string {
  switch (code) {
    case 'timeout':
      return `request timed out: ${subject}`;
    case 'no_responders':
      return `no responders: ${subject}`;
    case 'closed':
      return `bus closed: ${subject}`;
    default:
      return `request failed: ${subject}`;
  }
}

/** Default timeout of `Bus.request`. */
export const DEFAULT_REQUEST_TIMEOUT_MS = 5000;

const encoder = new TextEncoder();
const decoder = new TextDecoder();

export function toBytes(data: Uint8Array | string): Uint8Array {
  return typeof data === 'string' ? encoder.encode(data) : data;
}

export function bytesToString(data: Uint8Array): string {
  return decoder.decode(data);
}

export function parseJson<T>(data: Uint8Array): T {
  return JSON.parse(decoder.decode(data)) as T;
}

export const consoleBusLogger: BusLogger = {
  warn(o: object, m?: string) {
    console.warn(m ?? 'bus warning', o);
  },
};

export function errorInfo(err: unknown): { err: string } {
  return { err: err instanceof Error ? (err.stack ?? err.message) : String(err) };
}

/**
 * Hand a message to a subscription's handler: what it throws, or the promise it returns rejects
 * with, is logged (`bus handler failed`), never passed on to the publisher. Returns that promise,
 * caught, when the handler returned one.
 */
export function runHandler(
  handler: (msg: BusMessage) => void | Promise<void>,
  msg: BusMessage,
  logger: BusLogger,
): Promise<void> | undefined {
  try {
    const r = handler(msg);
    if (r && typeof (r as Promise<void>).then === 'function') return (r as Promise<void>).catch((err) => handlerFailed(logger, msg, err));
  } catch (err) {
    handlerFailed(logger, msg, err);
  }
  return undefined;
}

/** no closure per message: a handler's failure is logged from here, only when it fails */
function handlerFailed(logger: BusLogger, msg: BusMessage, err: unknown): void {
  logger.warn({ subject: msg.subject, ...errorInfo(err) }, 'bus handler failed');
}
