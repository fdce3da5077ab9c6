/** The sale's statement never reached the database: nothing was written. */
export class SaleNotSent extends Error {
  constructor(message: string, cause: unknown) {
    super(message, { cause });
    this.name = 'SaleNotSent';
  }
}

/**
 * The sale's statement was sent and no answer came (a timeout, a cut
 * connection): it may have committed. `session` is the server session
 * (backend process id) that received it, to be ended before anyone decides
 * what happened.
 */
export class SaleOutcomeUnknown extends Error {
  constructor(
    readonly session: number | undefined,
    cause: unknown,
  ) {
    super(
      `No answer to the sale's statement (${(cause as Error)?.message ?? String(cause)})`,
      { cause },
    );
    this.name = 'SaleOutcomeUnknown';
  }
}
