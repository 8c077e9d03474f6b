// Errors the command-line tool turns into exit codes (CONTRACT 7): usage 2, API 1.

/** A usage error: bad or conflicting options. Exit 2, before any request. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

/** An error answer from the HTTP API. Exit 1 with the server's message. */
export class ApiError extends Error {
  override readonly name = 'ApiError';
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}
