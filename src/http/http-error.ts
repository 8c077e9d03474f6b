import type { Context } from 'hono';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import {
  ApprovalRefusedError,
  ConflictError,
  ForbiddenError,
  InvalidError,
  LimitExceededError,
  NotFoundError,
  VetoedError,
  type ErrorDetail,
} from '../domain/errors.ts';

/** An HTTP error with the body of CONTRACT 3: {error, message, details?}. */
export class HttpError extends Error {
  override readonly name = 'HttpError';
  constructor(
    readonly status: ContentfulStatusCode,
    readonly code: string,
    message: string,
    readonly details?: ErrorDetail[],
  ) {
    super(message);
  }
}

export const unauthorized = (m = 'missing or unknown API token') => new HttpError(401, 'unauthorized', m);
export const forbidden = (m: string) => new HttpError(403, 'forbidden', m);

export function errorResponse(c: Context, err: HttpError) {
  const body: Record<string, unknown> = { error: err.code, message: err.message };
  if (err.details?.length) body.details = err.details;
  return c.json(body, err.status);
}

/** Map any thrown error to CONTRACT 3; unknown errors are a 500 with no internals. */
export function toHttpError(err: unknown): HttpError {
  if (err instanceof HttpError) return err;
  if (err instanceof InvalidError) return new HttpError(400, 'invalid_request', err.message, err.details);
  if (err instanceof ForbiddenError) return new HttpError(403, 'forbidden', err.message);
  if (err instanceof ApprovalRefusedError) return new HttpError(403, err.code, err.message);
  if (err instanceof NotFoundError) return new HttpError(404, 'not_found', err.message);
  if (err instanceof LimitExceededError) return new HttpError(409, 'limit_exceeded', err.message);
  if (err instanceof VetoedError) return new HttpError(409, 'vetoed', err.message);
  if (err instanceof ConflictError) return new HttpError(409, 'conflict', err.message);
  return new HttpError(500, 'internal', 'internal error');
}
