// HTTP client of the API commands (CONTRACT 2, 3, 7): base URL, bearer token and org header from
// flags or environment; error bodies become ApiError; network failures a clear message.
import { ofetch, FetchError } from 'ofetch';
import { ApiError, UsageError } from './exit-errors.ts';

export const DEFAULT_API_URL = 'http://127.0.0.1:8080';
/** How long one request may take (a ping waits for the delivery, at most its timeout). */
const REQUEST_TIMEOUT_MS = 60_000;

/** The global options of every API command (CONTRACT 7). */
export interface GlobalApiOptions {
  apiUrl?: string;
  token?: string;
  org?: string;
  json?: boolean;
}

export interface ApiConnection {
  baseUrl: string;
  token: string;
  orgId: string;
}

type Env = Record<string, string | undefined>;

const nonEmpty = (v: string | undefined): string | undefined => (v !== undefined && v.trim() !== '' ? v.trim() : undefined);

/**
 * Resolve where and as whom to call the API: flags first, then SVC_API_URL / SVC_API_TOKEN /
 * SVC_ORG_ID. A missing token or org, or an unusable URL, is a UsageError (before any request).
 */
export function resolveConnection(opts: GlobalApiOptions, env: Env = process.env): ApiConnection {
  const rawUrl = nonEmpty(opts.apiUrl) ?? nonEmpty(env.SVC_API_URL) ?? DEFAULT_API_URL;
  let url: URL;
  try {
    url = new URL(rawUrl);
  } catch {
    throw new UsageError(`--api-url ${JSON.stringify(rawUrl)} is not a valid URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new UsageError(`--api-url must be an http or https URL, got ${JSON.stringify(rawUrl)}`);
  }
  const token = nonEmpty(opts.token) ?? nonEmpty(env.SVC_API_TOKEN);
  if (!token) throw new UsageError('no API token: pass --token or set SVC_API_TOKEN');
  const orgId = nonEmpty(opts.org) ?? nonEmpty(env.SVC_ORG_ID);
  if (!orgId) throw new UsageError('no org id: pass --org or set SVC_ORG_ID');
  return { baseUrl: url.toString().replace(/\/+$/, ''), token, orgId };
}

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

export interface ApiClient {
  readonly baseUrl: string;
  request<T = unknown>(method: HttpMethod, path: string, body?: unknown): Promise<T>;
  get<T = unknown>(path: string): Promise<T>;
  post<T = unknown>(path: string, body?: unknown): Promise<T>;
  patch<T = unknown>(path: string, body: unknown): Promise<T>;
  del<T = unknown>(path: string): Promise<T>;
}

interface ErrorDetailLike {
  path?: unknown;
  message?: unknown;
}

/** The message of an error body, with the field paths of its details appended. */
export function errorMessage(body: unknown, status: number, statusText: string): { code: string; message: string } {
  const b = body && typeof body === 'object' && !Array.isArray(body) ? (body as Record<string, unknown>) : {};
  const code = typeof b.error === 'string' && b.error ? b.error : `http_${status}`;
  let message =
    typeof b.message === 'string' && b.message
      ? b.message
      : typeof body === 'string' && body.trim()
        ? body.trim().slice(0, 500)
        : `HTTP ${status}${statusText ? ` ${statusText}` : ''}`;
  if (Array.isArray(b.details) && b.details.length) {
    const parts = (b.details as ErrorDetailLike[]).map((d) => {
      const p = typeof d?.path === 'string' && d.path ? d.path : '';
      const m = typeof d?.message === 'string' ? d.message : '';
      // a message that names its path already (`webhook_url must be …`) is not prefixed with it again
      return p && m ? (m.startsWith(`${p} `) || m.startsWith(`${p}:`) ? m : `${p}: ${m}`) : p || m;
    });
    // the server's message names the first detail already (`invalid request: webhook_url: …`): say each once
    const list = parts.filter((p) => p && !message.includes(p)).join('; ');
    if (list) message += ` (${list})`;
  }
  return { code, message };
}

function networkMessage(err: unknown, baseUrl: string): string {
  let cause: unknown = err instanceof FetchError ? (err.cause ?? err) : err;
  // undici wraps the socket error: TypeError('fetch failed', {cause: Error{code}})
  if (cause instanceof Error && cause.message === 'fetch failed' && cause.cause) cause = cause.cause;
  const e = cause as { name?: string; code?: string; message?: string } | undefined;
  if (e?.name === 'TimeoutError' || e?.name === 'AbortError') {
    return `the svc API at ${baseUrl} did not answer within ${REQUEST_TIMEOUT_MS / 1000}s`;
  }
  const why = e?.code ? `${e.code}${e.message && !e.message.includes(e.code) ? ` ${e.message}` : ''}` : (e?.message ?? String(cause));
  return `cannot reach the svc API at ${baseUrl} (${why}); check --api-url / SVC_API_URL and that \`svc serve\` is running`;
}

/** An API client for one connection. Non-2xx answers throw ApiError; no request is retried. */
export function createApiClient(conn: ApiConnection): ApiClient {
  const headers = {
    authorization: `Bearer ${conn.token}`,
    'x-svc-org-id': conn.orgId,
    accept: 'application/json',
  };
  async function request<T>(method: HttpMethod, path: string, body?: unknown): Promise<T> {
    let res;
    try {
      res = await ofetch.raw<string, 'text'>(`${conn.baseUrl}${path}`, {
        method,
        headers: body === undefined ? headers : { ...headers, 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
        responseType: 'text',
        ignoreResponseError: true,
        retry: false,
        timeout: REQUEST_TIMEOUT_MS,
        redirect: 'manual',
      });
    } catch (err) {
      throw new Error(networkMessage(err, conn.baseUrl));
    }
    const text = typeof res._data === 'string' ? res._data : '';
    let data: unknown;
    if (text.trim()) {
      try {
        data = JSON.parse(text);
      } catch {
        data = text;
      }
    }
    if (res.status < 200 || res.status >= 300) {
      const { code, message } = errorMessage(data, res.status, res.statusText);
      throw new ApiError(res.status, code, message);
    }
    return data as T;
  }
  return {
    baseUrl: conn.baseUrl,
    request,
    get: <T>(p: string) => request<T>('GET', p),
    post: <T>(p: string, b?: unknown) => request<T>('POST', p, b),
    patch: <T>(p: string, b: unknown) => request<T>('PATCH', p, b),
    del: <T>(p: string) => request<T>('DELETE', p),
  };
}

/** Encode one path segment (ids are `[a-z0-9_]`, but user input is not trusted to be). */
export const seg = (s: string): string => encodeURIComponent(s);
