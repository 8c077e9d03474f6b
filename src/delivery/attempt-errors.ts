// Why an attempt failed, in a short text that names no URL, secret or body (the attempt log, the
// delivery status, `svc listen --forward-to`).
import { TargetLookupError, TargetRefusedError } from './guard.ts';

/** The attempt's time ran out (the whole exchange, from its start). */
export class DeliveryTimeout extends Error {
  override readonly name = 'DeliveryTimeout';
  constructor(readonly ms: number) {
    super(`timeout after ${ms} ms`);
  }
}
/** The attempt was given up before its answer: the deliverer closed, an invalid URL, no response. */
export class DeliveryAborted extends Error {
  override readonly name = 'DeliveryAborted';
}

const TLS_CODES = new Set([
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'ERR_TLS_CERT_ALTNAME_INVALID',
  'ERR_SSL_WRONG_VERSION_NUMBER',
]);

/** A short error string that names no URL, secret or body. */
export function describeError(err: unknown, timeoutMs: number): string {
  if (err instanceof DeliveryTimeout) return err.message;
  if (err instanceof DeliveryAborted) return err.message;
  if (err instanceof TargetRefusedError) return err.short;
  if (err instanceof TargetLookupError) return `dns lookup failed (${err.code})`;
  const e = err as { code?: string; name?: string; cause?: unknown } | null;
  const code = e?.code ?? (e?.cause as { code?: string } | undefined)?.code;
  switch (code) {
    case 'ECONNREFUSED':
      return 'connection refused';
    case 'ECONNRESET':
      return 'connection reset';
    case 'EPIPE':
    case 'UND_ERR_SOCKET':
    case 'ERR_RECEIVER_CLOSED':
      return 'connection closed by receiver';
    case 'ERR_POOL_DESTROYED':
      return 'aborted: shutting down';
    case 'ETIMEDOUT':
    case 'UND_ERR_CONNECT_TIMEOUT':
      return 'connect timeout';
    case 'UND_ERR_HEADERS_TIMEOUT':
    case 'UND_ERR_BODY_TIMEOUT':
      return `timeout after ${timeoutMs} ms`;
    case 'ENETUNREACH':
    case 'EHOSTUNREACH':
      return 'host unreachable';
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return `dns lookup failed (${code})`;
    case 'UND_ERR_RES_CONTENT_LENGTH_MISMATCH':
    case 'HPE_INVALID_CONSTANT':
    case 'HPE_INVALID_HEADER_TOKEN':
    case 'UND_ERR_INFO':
      return 'invalid HTTP response';
  }
  if (code && TLS_CODES.has(code)) return `tls error (${code})`;
  if (code && /^(ERR_SSL|ERR_TLS)/.test(code)) return `tls error (${code})`;
  if (code && /^HPE_/.test(code)) return 'invalid HTTP response';
  if (e?.name === 'AbortError') return 'aborted';
  return code ? `network error (${code})` : 'network error';
}
