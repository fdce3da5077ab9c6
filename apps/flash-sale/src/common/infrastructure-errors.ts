/**
 * Recognises errors that mean "Redis or the database is unreachable or too
 * slow" (answered 503) as opposed to bugs (answered 500).
 */

const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
]);

// SQLSTATE classes: 08 connection exception, 53 insufficient resources,
// 57 operator intervention (shutdown, statement timeout), 58 system error.
const UNAVAILABLE_SQLSTATE = /^(08|53|57|58)/;

// ioredis and pg report these without a code.
const UNAVAILABLE_MESSAGE =
  /Connection is closed|Command timed out|Reached the max retries per request|Stream isn't writeable|enableOfflineQueue|Connection terminated|timeout exceeded when trying to connect|Query read timeout|Client has encountered a connection error|Cannot use a pool after calling end|connect ECONNREFUSED/i;

export function isInfrastructureError(error: unknown): boolean {
  for (let current = error, depth = 0; depth < 5; depth++) {
    if (typeof current !== 'object' || current === null) return false;
    const { code, message, name } = current as {
      code?: unknown;
      message?: unknown;
      name?: unknown;
    };
    if (typeof code === 'string') {
      if (NETWORK_CODES.has(code)) return true;
      if (/^[0-9A-Z]{5}$/.test(code) && UNAVAILABLE_SQLSTATE.test(code))
        return true;
    }
    if (name === 'MaxRetriesPerRequestError') return true;
    if (typeof message === 'string' && UNAVAILABLE_MESSAGE.test(message))
      return true;
    if (Array.isArray((current as { errors?: unknown }).errors)) {
      // AggregateError from a connection attempt to several addresses.
      if ((current as { errors: unknown[] }).errors.some(isInfrastructureError))
        return true;
    }
    current = (current as { cause?: unknown }).cause;
  }
  return false;
}

/** PostgreSQL's unique_violation. */
export function isUniqueViolation(error: unknown): boolean {
  return (error as { code?: unknown } | null)?.code === '23505';
}
