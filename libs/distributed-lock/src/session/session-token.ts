import { randomBytes } from 'node:crypto';

// An owner token bound to a process session reads `<session id>.<random>`.
// Owner tokens are base64url, which has no '.', so the session of any holder
// can be read off the token stored in the lock, by any process, with no
// lookup: that is how a waiter finds whose session to check.

const separator = '.';

/** A new session id: 96 random bits, base64url. Never reused. */
export function newSessionId(): string {
  return randomBytes(12).toString('base64url');
}

/** The owner token `random`, bound to session `sessionId`. */
export function sessionToken(sessionId: string, random: string): string {
  return `${sessionId}${separator}${random}`;
}

/** The session a holder's token is bound to; undefined for a token bound to none. */
export function sessionOf(token: string): string | undefined {
  const at = token.indexOf(separator);
  return at > 0 ? token.slice(0, at) : undefined;
}

/** Whether two tokens are bound to the same session, or both to none. */
export function sameSession(a: string, b: string): boolean {
  return sessionOf(a) === sessionOf(b);
}

/**
 * The store key of session `id` under the backend's key prefix: a slot of its
 * own on Redis Cluster (the braces), apart from any lock's.
 */
export function sessionKey(keyPrefix: string, id: string): string {
  return `${keyPrefix}session:{${id}}`;
}
