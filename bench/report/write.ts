import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { repoRoot } from '../cli.js';
import { contenders } from '../contenders/index.js';
import { formatSeconds } from '../progress.js';
import type { BenchResults } from '../results.js';
import { repetitionsOfRows } from './sections/c-contention.js';
import { jsonName, renderMarkdown } from './markdown.js';
import { consoleSummary } from './summary.js';
import { renderContentionSvg } from './svg.js';

const chartName = 'lock-benchmark-contention.svg';
const reportName = 'lock-benchmark.md';

/** Writes the JSON, the chart and the Markdown report to `out`, and prints the ratios and targets. */
export async function writeReport(
  bundle: BenchResults,
  out: string,
): Promise<void> {
  await mkdir(out, { recursive: true });
  const kinds = new Map(
    [...contenders.values()].map((c) => [c.id, c.kind] as const),
  );
  if (bundle.C) {
    await writeFile(
      path.join(out, chartName),
      renderContentionSvg(
        bundle.C,
        kinds,
        `${bundle.mode} run, ${bundle.startedAt.slice(0, 16).replace('T', ' ')} UTC, medians over ${repetitionsOfRows(bundle.C)} (windows of ${bundle.C.windowMs} ms); ${bundle.machine.cores} cores, Redis ${bundle.machine.redis.split(' ')[0]}`,
      ),
    );
  }
  await writeFile(
    path.join(out, jsonName(bundle)),
    `${JSON.stringify(bundle, jsonReplacer, 2)}\n`,
  );
  await writeFile(
    path.join(out, reportName),
    renderMarkdown(bundle, chartName),
  );
  process.stdout.write(`\n${consoleSummary(bundle)}`);
  process.stdout.write(
    `\nReport: ${path.relative(repoRoot, path.join(out, reportName))} (${formatSeconds(bundle.durationSec)})\n`,
  );
  if (bundle.errors.length > 0) {
    process.stdout.write(`\n${bundle.errors.length} error(s):\n`);
    for (const e of bundle.errors) process.stdout.write(`  ${e}\n`);
  }
}

/** Contender failures recorded inside the scenarios' results. */
export function collectErrors(r: Partial<BenchResults>): string[] {
  const found: string[] = [];
  for (const s of ['A', 'B'] as const) {
    for (const row of r[s]?.rows ?? []) {
      if (row.error) found.push(`${s}: ${row.label}: ${row.error}`);
    }
  }
  for (const variant of r.C?.variants ?? []) {
    for (const row of variant.rows) {
      if (row.error)
        found.push(`C (${variant.label}): ${row.label}: ${row.error}`);
    }
  }
  for (const size of r.D?.sizes ?? []) {
    for (const row of size.rows) {
      if (row.error)
        found.push(`D (${size.nodes} nodes): ${row.label}: ${row.error}`);
    }
  }
  if (r.E?.error) found.push(`E: ${r.E.error}`);
  if (r.F?.status === 'failed') found.push(`F: ${r.F.message}`);
  if (r.G?.error) found.push(`G: ${r.G.error}`);
  for (const row of r.H?.rows ?? []) {
    if (row.error) found.push(`H (${row.label}): ${row.error}`);
  }
  for (const variant of r.I?.variants ?? []) {
    for (const row of variant.rows) {
      if (row.error)
        found.push(`I (${variant.label}): ${row.label}: ${row.error}`);
    }
  }
  for (const variant of r.J?.variants ?? []) {
    for (const row of variant.rows) {
      if (row.error)
        found.push(`J (${variant.label}): ${row.label}: ${row.error}`);
    }
  }
  return found;
}

/** Reads back what {@link jsonReplacer} wrote. */
export function jsonReviver(_key: string, value: unknown): unknown {
  if (value === 'Infinity') return Number.POSITIVE_INFINITY;
  if (value === '-Infinity') return Number.NEGATIVE_INFINITY;
  if (value === 'NaN') return Number.NaN;
  return value;
}

/** JSON has no Infinity or NaN: write them as strings. */
function jsonReplacer(_key: string, value: unknown): unknown {
  if (typeof value === 'number' && !Number.isFinite(value))
    return String(value);
  return value;
}
