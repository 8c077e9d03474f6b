// Domain errors: thrown by services, mapped to HTTP statuses by src/http/http-error.ts (CONTRACT 3).

export interface ErrorDetail {
  path: string;
  message: string;
}

export class InvalidError extends Error {
  override readonly name = 'InvalidError';
  constructor(
    message: string,
    readonly details?: ErrorDetail[],
  ) {
    super(message);
  }
}

export class NotFoundError extends Error {
  override readonly name = 'NotFoundError';
  constructor(what: string, id?: string) {
    super(id ? `${what} ${id} not found` : `${what} not found`);
  }
}

export class ConflictError extends Error {
  override readonly name: string = 'ConflictError';
}

/** Applying an app config that is vetoed (a conflict: 409 `vetoed`, CONTRACT 4.3); the message carries the reason. */
export class VetoedError extends ConflictError {
  override readonly name = 'VetoedError';
}

/** A per-org limit of CONTRACT 8 (409 `limit_exceeded`); the message names the limit. */
export class LimitExceededError extends Error {
  override readonly name = 'LimitExceededError';
  constructor(
    /** which limit, e.g. `webhooks_per_org` */
    readonly limit: string,
    message: string,
  ) {
    super(message);
  }
}

/**
 * A fact whose event would be over the event size limit (CONTRACT 8, 256 KiB): the whole fact is
 * refused and nothing of it is stored; a producer is answered `{ok: false, error: "event_too_large"}`.
 */
export class EventTooLargeError extends Error {
  override readonly name = 'EventTooLargeError';
  readonly code = 'event_too_large';
  constructor(
    readonly type: string,
    readonly bytes: number,
    readonly limit: number,
  ) {
    super(`the ${type} event would be ${bytes} bytes, over the ${limit}-byte limit of one event; nothing was recorded`);
  }
}

/** The message of whatever was thrown. */
export function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/**
 * A token (or a dashboard session) whose scope does not cover the operation (403 `forbidden`, CONTRACT 2);
 * the message names the scope needed.
 */
export class ForbiddenError extends Error {
  override readonly name = 'ForbiddenError';
  constructor(
    readonly scope: string,
    message: string,
  ) {
    super(message);
  }
}

/**
 * An approval response the step's policy does not admit (CONTRACT 10.4, 403): `not_an_approver`
 * (no rule admits the token; the message names the rules) or `self_approval` (the token started the run).
 */
export class ApprovalRefusedError extends Error {
  override readonly name = 'ApprovalRefusedError';
  constructor(
    readonly code: 'not_an_approver' | 'self_approval',
    message: string,
  ) {
    super(message);
  }
}
