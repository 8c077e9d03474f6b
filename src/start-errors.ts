// How a `svc serve` start-up ends short (src/server.ts startServer), in a module of their own: the
// command (src/cli/serve.ts) tells them apart without loading the server before it starts it.

/** The HTTP port is bound by another process (EADDRINUSE). */
export class PortInUseError extends Error {
  override readonly name = 'PortInUseError';
  constructor(
    readonly port: number,
    options?: ErrorOptions,
  ) {
    super(`port ${port} is in use`, options);
  }
}

/** The start was abandoned (ServerOptions.signal); everything it had started is stopped. */
export class StartAbortedError extends Error {
  override readonly name = 'StartAbortedError';
  constructor() {
    super('start-up abandoned');
  }
}
