import { LockTemplateError } from '../errors/lock-errors.js';
import {
  functionKeyBuilder,
  templateKeyBuilder,
  type KeyBuilder,
} from './key-builders.js';
import { isPlaceholder, parseTemplate } from './key-template-parser.js';
import {
  byteLength,
  DEFAULT_MAX_KEY_LENGTH,
  describeValue,
  isValidMaxKeyLength,
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

function describeOrigin({ className, methodName }: KeyTemplateOrigin): string {
  const name = [className, methodName].filter(Boolean).join('.');
  return name === '' ? '' : ` on ${name}`;
}
