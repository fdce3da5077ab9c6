/** Number formatting for the report: fixed, locale-free, with placeholders for missing data. */
import type { RatioInterval } from '../stats.js';

const dash = '–';

export function int(value: number): string {
  if (!Number.isFinite(value)) return Number.isNaN(value) ? dash : '∞';
  return Math.round(value).toLocaleString('en-US');
}

export function ms(value: number): string {
  if (!Number.isFinite(value)) return Number.isNaN(value) ? dash : '∞';
  if (value >= 100) return value.toFixed(0);
  if (value >= 10) return value.toFixed(1);
  if (value >= 1) return value.toFixed(2);
  return value.toFixed(3);
}

export function ratio(value: number): string {
  if (!Number.isFinite(value)) return Number.isNaN(value) ? dash : '∞';
  return `${value.toFixed(2)}x`;
}

/**
 * A ratio's interval, `lower..upper` (see RatioInterval); below 5
 * repetitions the smallest and largest ratio, said so.
 */
export function bounds(interval: RatioInterval | undefined): string {
  if (!interval || interval.n === 0) return dash;
  const range = `${ratio(interval.lower)}..${ratio(interval.upper)}`;
  return interval.tooFew
    ? `${range} (min..max: too few repetitions, ${interval.n})`
    : range;
}

export function num(value: number, digits = 2): string {
  if (!Number.isFinite(value)) return Number.isNaN(value) ? dash : '∞';
  return value.toFixed(digits);
}

export function pct(value: number): string {
  if (!Number.isFinite(value)) return dash;
  return `${(value * 100).toFixed(0)}%`;
}

export function bytes(value: number): string {
  if (!Number.isFinite(value)) return dash;
  const sign = value < 0 ? '-' : '';
  const abs = Math.abs(value);
  if (abs >= 1024 * 1024) return `${sign}${(abs / 1024 / 1024).toFixed(1)} MiB`;
  if (abs >= 1024) return `${sign}${(abs / 1024).toFixed(0)} KiB`;
  return `${sign}${Math.round(abs)} B`;
}

/** `value (ratio to base)`, the report's cell for a figure with its baseline. */
export function withRatio(
  value: number,
  base: number,
  format: (v: number) => string,
): string {
  if (Number.isNaN(value)) return format(value);
  return `${format(value)} (${ratio(value / base)})`;
}

const esc = (cell: string) => cell.replaceAll('|', '\\|');

/** A Markdown table; cells are escaped for pipes. */
export function table(
  header: readonly string[],
  rows: readonly (readonly string[])[],
  align: readonly ('l' | 'r')[] = [],
): string {
  const widths = header.map((h, i) =>
    Math.max(3, esc(h).length, ...rows.map((r) => esc(r[i] ?? '').length)),
  );
  const line = (cells: readonly string[]) =>
    `| ${cells
      .map((c, i) =>
        align[i] === 'r'
          ? esc(c).padStart(widths[i])
          : esc(c).padEnd(widths[i]),
      )
      .join(' | ')} |`;
  const rule = `| ${widths
    .map((w, i) => (align[i] === 'r' ? `${'-'.repeat(w - 1)}:` : '-'.repeat(w)))
    .join(' | ')} |`;
  return [line(header), rule, ...rows.map(line)].join('\n');
}
