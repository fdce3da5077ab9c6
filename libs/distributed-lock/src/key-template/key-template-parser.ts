import type { LockTemplateError } from '../errors/lock-errors.js';
import { findForbiddenCharacter } from './lock-key-rules.js';

/*
 * Reads a key template such as `'order:<1.items.0.sku>'` into its literal text
 * and placeholders, once, at decoration time.
 */

export interface Placeholder {
  /** As written in the template, e.g. `<0.user.id>`. */
  readonly label: string;
  readonly argumentIndex: number;
  readonly path: readonly string[];
}

export type TemplatePart = string | Placeholder;

const ARGUMENT_INDEX = /^\d+$/;
const PATH_SEGMENT = /^(?:[A-Za-z_$][A-Za-z0-9_$]*|\d+)$/;

export function parseTemplate(
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

export function isPlaceholder(part: TemplatePart): part is Placeholder {
  return typeof part !== 'string';
}
