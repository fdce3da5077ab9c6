import { LockKeyError, LockTemplateError } from '../errors/lock-errors.js';
import {
  byteLength,
  DEFAULT_MAX_KEY_LENGTH,
  describeValue,
  encodeKeyPart,
  findForbiddenCharacter,
  findKeyProblem,
  isValidMaxKeyLength,
  quoteKey,
} from './lock-key-rules.js';

/**
 * Where the keys of a lock come from: a template such as `'coupon:<0>'` or
 * `'order:<1.items.0.sku>'`, where `<N>` is the N-th argument of the method and
 * `<N.a.b>` a property path into it, or a function that receives the method's
 * arguments and returns one key or several.
 */
export type LockKeySource =
  string | ((...args: any[]) => string | readonly string[]);

/** The decorated method, named in error messages. */
export interface KeyTemplateOrigin {
  className?: string;
  methodName?: string;
}

export interface CompileLockKeysOptions {
  /** Longest key accepted, in UTF-8 bytes. Defaults to {@link DEFAULT_MAX_KEY_LENGTH}. */
  maxKeyLength?: number;
}

/** Lock key sources parsed once, ready to build keys for each call. */
export interface CompiledLockKeys {
  /** The templates joined with `, `; a function shows as `[function name]`. */
  readonly description: string;
  /**
   * The highest argument index any template reads, so the caller can check it
   * against the method's parameter count at startup; -1 if no template reads
   * an argument (functions are not counted: what they read is unknown).
   */
  readonly highestArgumentIndex: number;
  /**
   * Builds the keys for one call, deduplicated in source order.
   *
   * @throws {LockKeyError} if a placeholder resolves to an unusable value, a key
   * function throws or returns an invalid key, or a key is too long.
   */
  resolve(args: readonly unknown[]): string[];
}

/** Builds the keys of one source from a call's arguments. */
type KeyBuilder = (args: readonly unknown[]) => string[];

interface Placeholder {
  /** As written in the template, e.g. `<0.user.id>`. */
  readonly label: string;
  readonly argumentIndex: number;
  readonly path: readonly string[];
}

type TemplatePart = string | Placeholder;

type KeyValue = string | number | bigint;

const ARGUMENT_INDEX = /^\d+$/;
const PATH_SEGMENT = /^(?:[A-Za-z_$][A-Za-z0-9_$]*|\d+)$/;

/**
 * Parses lock key sources once, at decoration time, so that a malformed
 * template stops the application at startup instead of failing on a request.
 *
 * @param source one template or function, or several (one key each).
 * @param origin the decorated class and method, named in error messages.
 * @throws {LockTemplateError} if a template is malformed, no source is given,
 * or a source is neither a string nor a function.
 */
export function compileLockKeys(
  source: LockKeySource | readonly LockKeySource[],
  origin: KeyTemplateOrigin = {},
  options: CompileLockKeysOptions = {},
): CompiledLockKeys {
  const where = describeOrigin(origin);
  const templateError = (template: string, problem: string) =>
    new LockTemplateError(
      `Invalid lock key template ${JSON.stringify(template)}${where}: ${problem}`,
      template,
      origin.className,
      origin.methodName,
    );
  // For problems that do not belong to one template.
  const sourceError = (problem: string) =>
    new LockTemplateError(
      `Invalid lock key${where}: ${problem}`,
      '',
      origin.className,
      origin.methodName,
    );

  const maxKeyLength = options.maxKeyLength ?? DEFAULT_MAX_KEY_LENGTH;
  if (!isValidMaxKeyLength(maxKeyLength)) {
    throw sourceError(
      `maxKeyLength must be a positive integer, got ${maxKeyLength}`,
    );
  }
  const sources: readonly unknown[] = Array.isArray(source) ? source : [source];
  if (sources.length === 0) {
    throw sourceError('no key template given');
  }

  const builders: KeyBuilder[] = [];
  const descriptions: string[] = [];
  let highestArgumentIndex = -1;
  for (const item of sources) {
    if (typeof item === 'string') {
      const fail = (problem: string) => templateError(item, problem);
      const parts = parseTemplate(item, fail);
      const placeholders = parts.filter(isPlaceholder);
      // Every placeholder adds at least one byte.
      const shortestKeyBytes =
        placeholders.length +
        parts.reduce(
          (sum, part) => sum + (isPlaceholder(part) ? 0 : byteLength(part)),
          0,
        );
      if (shortestKeyBytes > maxKeyLength) {
        throw fail(
          `its keys are at least ${shortestKeyBytes} bytes long in UTF-8; the maximum is ${maxKeyLength}`,
        );
      }
      for (const { argumentIndex } of placeholders) {
        highestArgumentIndex = Math.max(highestArgumentIndex, argumentIndex);
      }
      builders.push(templateKeyBuilder(item, parts, where, maxKeyLength));
      descriptions.push(item);
    } else if (typeof item === 'function') {
      const description = `[function ${item.name || 'anonymous'}]`;
      builders.push(
        functionKeyBuilder(
          item as (...args: unknown[]) => unknown,
          description,
          where,
          maxKeyLength,
        ),
      );
      descriptions.push(description);
    } else {
      throw sourceError(
        `a key source must be a string or a function, got ${describeValue(item)}`,
      );
    }
  }

  return Object.freeze({
    description: descriptions.join(', '),
    highestArgumentIndex,
    resolve(args: readonly unknown[]): string[] {
      if (builders.length === 1) {
        const keys = builders[0](args);
        return keys.length === 1 ? keys : [...new Set(keys)];
      }
      const keys = new Set<string>();
      for (const build of builders) {
        for (const key of build(args)) keys.add(key);
      }
      return [...keys];
    },
  });
}

function parseTemplate(
  template: string,
  fail: (problem: string) => LockTemplateError,
): TemplatePart[] {
  if (template === '') throw fail('the template is empty');
  const forbidden = findForbiddenCharacter(template);
  if (forbidden !== undefined) throw fail(forbidden);

  const parts: TemplatePart[] = [];
  let cursor = 0;
  while (cursor < template.length) {
    const open = template.indexOf('<', cursor);
    const literal = template.slice(cursor, open === -1 ? undefined : open);
    const stray = literal.indexOf('>');
    if (stray !== -1) throw fail(`stray ">" at position ${cursor + stray}`);
    if (literal !== '') parts.push(literal);
    if (open === -1) break;

    const close = template.indexOf('>', open + 1);
    const nextOpen = template.indexOf('<', open + 1);
    if (close === -1 || (nextOpen !== -1 && nextOpen < close)) {
      throw fail(`unclosed placeholder at position ${open}`);
    }
    parts.push(parsePlaceholder(template.slice(open + 1, close), open, fail));
    cursor = close + 1;
    if (
      cursor < template.length &&
      (template[cursor] === '<' || !isAlwaysEncoded(template[cursor]))
    ) {
      // Values never contain an encoded character, so one right after a
      // placeholder marks unambiguously where the value ends. With "-" there,
      // 'a-b','c' and 'a','b-c' would build the same key for "<0>-<1>".
      throw fail(
        `the placeholder at position ${open} must end the template or be followed by a separator ` +
          `such as ":" that values can never contain (found ${JSON.stringify(template[cursor])})`,
      );
    }
  }
  return parts;
}

/** True for a character that {@link encodeKeyPart} always percent-encodes. */
function isAlwaysEncoded(char: string): boolean {
  return encodeURIComponent(char) !== char;
}

function parsePlaceholder(
  body: string,
  position: number,
  fail: (problem: string) => LockTemplateError,
): Placeholder {
  const label = `<${body}>`;
  if (body === '') throw fail(`empty placeholder at position ${position}`);
  const [indexText, ...path] = body.split('.');
  const argumentIndex = Number(indexText);
  if (!ARGUMENT_INDEX.test(indexText) || !Number.isSafeInteger(argumentIndex)) {
    throw fail(
      `argument index ${JSON.stringify(indexText)} in ${label} at position ${position} is not a non-negative integer`,
    );
  }
  for (const segment of path) {
    if (!PATH_SEGMENT.test(segment)) {
      throw fail(
        segment === ''
          ? `empty path segment in ${label} at position ${position}`
          : `invalid path segment ${JSON.stringify(segment)} in ${label} at position ${position}`,
      );
    }
  }
  return { label, argumentIndex, path };
}

function templateKeyBuilder(
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

function functionKeyBuilder(
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

function isPlaceholder(part: TemplatePart): part is Placeholder {
  return typeof part !== 'string';
}

function isKeyValue(value: unknown): value is KeyValue {
  return (
    (typeof value === 'string' && value !== '') ||
    (typeof value === 'number' && Number.isFinite(value)) ||
    typeof value === 'bigint'
  );
}

function describeOrigin({ className, methodName }: KeyTemplateOrigin): string {
  const name = [className, methodName].filter(Boolean).join('.');
  return name === '' ? '' : ` on ${name}`;
}
