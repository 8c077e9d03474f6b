import type { Context } from 'hono';
import type { z } from 'zod';
import { HttpError } from './http-error.ts';
import type { ErrorDetail } from '../domain/errors.ts';

/** zod issues → CONTRACT 3 details, each naming the field path (unknown keys named one by one). */
export function issuesToDetails(issues: readonly z.core.$ZodIssue[]): ErrorDetail[] {
  const out: ErrorDetail[] = [];
  for (const issue of issues) {
    const base = issue.path.map(String);
    if (issue.code === 'unrecognized_keys') {
      for (const key of issue.keys) out.push({ path: [...base, key].join('.'), message: 'unknown field' });
      continue;
    }
    if (issue.code === 'invalid_key' && issue.issues.length) {
      // a record key that fails its schema (a label key, CONTRACT 8): the path names the key
      for (const inner of issue.issues) out.push({ path: base.join('.'), message: inner.message });
      continue;
    }
    if (issue.code === 'invalid_union' && Array.isArray(issue.errors) && issue.errors.length) {
      const nested = issue.errors.flat();
      if (nested.length) {
        out.push(...issuesToDetails(nested.map((n) => ({ ...n, path: [...issue.path, ...n.path] }))));
        continue;
      }
    }
    out.push({ path: base.join('.') || '(body)', message: issue.message });
  }
  return out;
}

/** `path: message`, or the message alone when it names its path already (`webhook_url must be …`). */
export function detailText(d: ErrorDetail): string {
  return d.message.startsWith(`${d.path} `) || d.message.startsWith(`${d.path}:`) ? d.message : `${d.path}: ${d.message}`;
}

export function invalid(details: ErrorDetail[]): HttpError {
  const first = details[0];
  const summary = first ? detailText(first) : 'invalid request';
  return new HttpError(400, 'invalid_request', `invalid request: ${summary}`, details);
}

/**
 * Read a JSON body and validate it. A missing body reads as `emptyAs` (undefined = required).
 * Wrong content type 415, malformed JSON 400, schema failures 400 with details.
 */
export async function readJson<S extends z.ZodType>(c: Context, schema: S, emptyAs?: unknown): Promise<z.infer<S>> {
  const text = await c.req.text();
  let value: unknown;
  if (text.trim() === '') {
    if (emptyAs === undefined) throw invalid([{ path: '(body)', message: 'a JSON body is required' }]);
    value = emptyAs;
  } else {
    const ct = (c.req.header('content-type') ?? '').split(';')[0].trim().toLowerCase();
    if (ct !== 'application/json' && !ct.endsWith('+json')) {
      throw new HttpError(415, 'unsupported_media_type', 'request body must be application/json');
    }
    let protoPath: string | null = null;
    try {
      // `__proto__` would be dropped or rewire prototypes when copied: refuse it outright
      value = JSON.parse(text, (key: string, field: unknown) => {
        if (key === '__proto__') protoPath ??= '__proto__';
        return field;
      });
    } catch {
      throw new HttpError(400, 'invalid_request', 'malformed JSON body', [{ path: '(body)', message: 'malformed JSON' }]);
    }
    if (protoPath) throw invalid([{ path: protoPath, message: 'the key __proto__ is not allowed' }]);
  }
  const r = schema.safeParse(value);
  if (!r.success) throw invalid(issuesToDetails(r.error.issues));
  return r.data;
}
