import { LockKeyError } from '../errors/lock-errors.js';

/*
 * What a lock key may be, however it was made (given as is, returned by a key
 * function, or resolved from a template), and how template values are encoded.
 */

/** Longest lock key accepted by default, in UTF-8 bytes (the configured prefix not included). */
export const DEFAULT_MAX_KEY_LENGTH = 512;

/**
 * Encodes a value substituted into a template: `encodeURIComponent` of its
 * string form. Separators (`:`), hash-tag braces, `%`, whitespace and control
 * characters come out percent-encoded, so a value can never reach into another
 * key's namespace (`coupon:<0>` with `'1:admin'` gives `coupon:1%3Aadmin`).
 * Only `A-Z a-z 0-9 - _ . ! ~ * ' ( )` stay as they are: use one of the encoded
 * characters, such as `:`, to separate placeholders in a template.
 *
 * @throws {URIError} if a string contains an unpaired surrogate.
 */
export function encodeKeyPart(value: string | number | bigint): string {
  return encodeURIComponent(String(value));
}

/**
 * Checks a key given as is (to `LockService.acquire` or returned by a key
 * function): a non-empty, well-formed string without `{`, `}` or control
 * characters, at most `maxKeyLength` bytes long in UTF-8.
 *
 * @returns the key, unchanged.
 * @throws {LockKeyError} if the key breaks one of these rules.
 */
export function validateLockKey(
  key: string,
  maxKeyLength: number = DEFAULT_MAX_KEY_LENGTH,
): string {
  if (!isValidMaxKeyLength(maxKeyLength)) {
    throw new LockKeyError(
      `maxKeyLength must be a positive integer, got ${maxKeyLength}`,
    );
  }
  if (typeof key !== 'string') {
    throw new LockKeyError(
      `Invalid lock key: expected a string, got ${describeValue(key)}`,
    );
  }
  const problem = findKeyProblem(key, maxKeyLength);
  if (problem !== undefined) {
    throw new LockKeyError(`Invalid lock key ${quoteKey(key)}: ${problem}`);
  }
  return key;
}

/** Why `key` cannot be used as given, or undefined if it can. */
export function findKeyProblem(
  key: string,
  maxKeyLength: number,
): string | undefined {
  if (key === '') return 'it is empty';
  const forbidden = findForbiddenCharacter(key);
  if (forbidden !== undefined) return forbidden;
  // A UTF-16 code unit takes at most 3 bytes in UTF-8.
  if (key.length * 3 <= maxKeyLength) return undefined;
  const bytes = byteLength(key);
  if (bytes > maxKeyLength) {
    return `it is ${bytes} bytes long in UTF-8; the maximum is ${maxKeyLength}`;
  }
  return undefined;
}

/** Any character {@link findForbiddenCharacter} may object to (surrogates: paired ones too). */
// oxlint-disable-next-line no-control-regex -- control characters are what it looks for
const SUSPECT_CHARACTER = /[{}\u0000-\u001f\u007f-\u009f\ud800-\udfff]/;

/**
 * Describes the first character that may not appear in a key as written:
 * braces (reserved for Redis Cluster hash tags, which the library sets itself),
 * control characters, and unpaired surrogates (Redis would store them as U+FFFD,
 * so two different keys could end up as the same one).
 */
export function findForbiddenCharacter(text: string): string | undefined {
  // Every key of every acquisition passes here: skip the scan for plain text.
  if (!SUSPECT_CHARACTER.test(text)) return undefined;
  for (let position = 0; position < text.length; position++) {
    const char = text[position];
    const code = text.charCodeAt(position);
    if (char === '{' || char === '}') {
      return `"${char}" at position ${position} is reserved for Redis Cluster hash tags`;
    }
    if (code <= 0x1f || (code >= 0x7f && code <= 0x9f)) {
      const hex = code.toString(16).toUpperCase().padStart(4, '0');
      return `control character U+${hex} at position ${position}`;
    }
    if (code >= 0xd800 && code <= 0xdfff) {
      const next = text.charCodeAt(position + 1);
      if (code <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) {
        position++;
        continue;
      }
      return `unpaired surrogate at position ${position}`;
    }
  }
  return undefined;
}

export function isValidMaxKeyLength(maxKeyLength: number): boolean {
  return Number.isSafeInteger(maxKeyLength) && maxKeyLength > 0;
}

/** The kind of a value, for error messages: never the value itself, which may be user data. */
export function describeValue(value: unknown): string {
  switch (typeof value) {
    case 'undefined':
      return 'undefined';
    case 'string':
      return value === '' ? 'an empty string' : 'a string';
    case 'number':
      return Number.isFinite(value) ? 'a number' : String(value);
    case 'bigint':
      return 'a bigint';
    case 'boolean':
      return 'a boolean';
    case 'symbol':
      return 'a symbol';
    case 'function':
      return 'a function';
    default:
      if (value === null) return 'null';
      try {
        return Array.isArray(value) ? 'an array' : 'an object';
      } catch {
        return 'an object'; // a revoked proxy
      }
  }
}

/** Quotes a key for a message, cut short so an oversized key does not flood the logs. */
export function quoteKey(key: string): string {
  const limit = 100;
  return key.length > limit
    ? `${JSON.stringify(key.slice(0, limit))}…`
    : JSON.stringify(key);
}

export function byteLength(text: string): number {
  return Buffer.byteLength(text, 'utf8');
}
