// Domain errors: thrown by services, mapped to HTTP statuses by src/http/errors.ts (CONTRACT 3).

export interface ErrorDetail {
  path: string;
  message: string;
}

export class InvalidError extends Error {
  constructor(
    message: string,
    readonly details?: ErrorDetail[],
  ) {
    super(message);
  }
}

export class NotFoundError extends Error {
  constructor(what: string, id?: string) {
    super(id ? `${what} ${id} not found` : `${what} not found`);
  }
}

export class ConflictError extends Error {}
