import { LockKeyError } from '../errors/lock-errors.js';
import {
  isPlaceholder,
  type Placeholder,
  type TemplatePart,
} from './key-template-parser.js';
import {
  byteLength,
  describeValue,
  encodeKeyPart,
  findKeyProblem,
  quoteKey,
} from './lock-key-rules.js';

/*
 * Builds the keys of one call from its arguments: one builder per key source,
 * made once at decoration time and run on every decorated call.
 */

/** Builds the keys of one source from a call's arguments. */
export type KeyBuilder = (args: readonly unknown[]) => string[];

type KeyValue = string | number | bigint;

export function templateKeyBuilder(
  template: string,
  parts: readonly TemplatePart[],
  where: string,
  maxKeyLength: number,
): KeyBuilder {
  const fail = (problem: string, placeholder?: Placeholder, cause?: unknown) =>
    new LockKeyError(
      `Cannot build lock key from template ${JSON.stringify(template)}${where}: ${problem}`,
      template,
      placeholder?.label,
      cause === undefined ? undefined : { cause },
    );

  const encodePlaceholder = (
    placeholder: Placeholder,
    args: readonly unknown[],
  ): string => {
    const value = readPlaceholder(placeholder, args, fail);
    try {
      return encodeKeyPart(value);
    } catch (error) {
      throw fail(
        `placeholder ${placeholder.label} resolved to a string with an unpaired surrogate`,
        placeholder,
        error,
      );
    }
  };

  return (args) => {
    const key = parts
      .map((part) =>
        isPlaceholder(part) ? encodePlaceholder(part, args) : part,
      )
      .join('');
    const bytes = byteLength(key);
    if (bytes > maxKeyLength) {
      throw fail(
        `the key is ${bytes} bytes long in UTF-8; the maximum is ${maxKeyLength}`,
      );
    }
    return [key];
  };
}

function readPlaceholder(
  placeholder: Placeholder,
  args: readonly unknown[],
  fail: (
    problem: string,
    placeholder: Placeholder,
    cause?: unknown,
  ) => LockKeyError,
): KeyValue {
  const { label, argumentIndex, path } = placeholder;
  const missingArgument =
    argumentIndex >= args.length
      ? ` (the method received ${args.length} argument${args.length === 1 ? '' : 's'})`
      : '';

  let value: unknown = args[argumentIndex];
  for (const [depth, segment] of path.entries()) {
    if (value === null || value === undefined) {
      const reached = `<${[argumentIndex, ...path.slice(0, depth)].join('.')}>`;
      throw fail(
        `placeholder ${label} cannot read ${JSON.stringify(segment)} because ${reached} is ${value}${missingArgument}`,
        placeholder,
      );
    }
    try {
      value = (value as Record<string, unknown>)[segment];
    } catch (error) {
      // A throwing getter or proxy trap must surface as a key error, not crash the call.
      throw fail(
        `placeholder ${label} threw while reading ${JSON.stringify(segment)}`,
        placeholder,
        error,
      );
    }
  }

  if (!isKeyValue(value)) {
    throw fail(
      `placeholder ${label} resolved to ${describeValue(value)}${missingArgument}; expected a non-empty string, a finite number or a bigint`,
      placeholder,
    );
  }
  return value;
}

export function functionKeyBuilder(
  keyFunction: (...args: any[]) => unknown,
  description: string,
  where: string,
  maxKeyLength: number,
): KeyBuilder {
  const fail = (problem: string, cause?: unknown) =>
    new LockKeyError(
      `Cannot build lock key from ${description}${where}: ${problem}`,
      description,
      undefined,
      cause === undefined ? undefined : { cause },
    );

  return (args) => {
    let result: unknown;
    try {
      result = keyFunction(...args);
    } catch (error) {
      throw fail('the key function threw (see cause)', error);
    }
    if (typeof result === 'string') result = [result];
    if (!Array.isArray(result)) {
      throw fail(
        `the key function returned ${describeValue(result)}; expected a string or an array of strings`,
      );
    }
    if (result.length === 0) throw fail('the key function returned no key');

    return result.map((key: unknown, index: number) => {
      if (typeof key !== 'string') {
        throw fail(
          `the key function returned ${describeValue(key)} at index ${index}; expected a string`,
        );
      }
      const problem = findKeyProblem(key, maxKeyLength);
      if (problem !== undefined) {
        throw fail(
          `the key function returned an invalid key ${quoteKey(key)}: ${problem}`,
        );
      }
      return key;
    });
  };
}

function isKeyValue(value: unknown): value is KeyValue {
  return (
    (typeof value === 'string' && value !== '') ||
    (typeof value === 'number' && Number.isFinite(value)) ||
    typeof value === 'bigint'
  );
}
