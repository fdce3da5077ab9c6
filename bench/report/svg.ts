import type {
  ContentionResult,
  ContentionRow,
} from '../scenarios/c-contention.js';
import { ms, num } from './format.js';

const colors = {
  ours: '#2b6cb0',
  baseline: '#4a5568',
  peer: '#dd6b20',
  starved: '#c53030',
  grid: '#cbd5e0',
  text: '#1a202c',
  muted: '#4a5568',
};

function esc(text: string): string {
  return text
    .replaceAll('&', '&amp;')
    .replaceAll('<', '&lt;')
    .replaceAll('>', '&gt;')
    .replaceAll('"', '&quot;');
}

/** A row's bar: its ratio to the raw FIFO hand-off, or to the raw lock in runs from before it. */
function barRatio(row: ContentionRow, toFifo: boolean): number {
  return toFifo ? (row.ratioToFifo?.median ?? Number.NaN) : row.ratio;
}

/**
 * C as a hand-written SVG: one panel per variant, one bar per contender for
 * its acquisitions/s relative to the raw FIFO hand-off (dashed line at 1x;
 * the polling raw lock in runs from before it), with fairness, starved
 * contenders, longest wait and hand-off p50 beside it.
 */
export function renderContentionSvg(
  c: ContentionResult,
  kinds: ReadonlyMap<string, 'baseline' | 'ours' | 'peer'>,
  subtitle: string,
): string {
  const width = 1260;
  const labelW = 300;
  const barW = 330;
  const rowH = 20;
  const panelHead = 34;
  const panelGap = 18;
  const top = 64;
  const toFifo = c.variants.some((v) =>
    v.rows.some((r) => r.ratioToFifo !== undefined),
  );
  const yardstick = toFifo ? 'raw FIFO' : 'raw';
  const ratios = c.variants.flatMap((v) =>
    v.rows.map((r) => barRatio(r, toFifo)).filter(Number.isFinite),
  );
  const maxRatio = Math.max(1.5, Math.ceil(Math.max(1, ...ratios) * 2) / 2);
  const x = (ratio: number) => labelW + (Math.max(0, ratio) / maxRatio) * barW;
  const parts: string[] = [];
  let y = top;
  for (const variant of c.variants) {
    parts.push(
      `<text x="12" y="${y + 20}" font-size="15" font-weight="bold" fill="${colors.text}">${esc(variant.label)}</text>`,
    );
    const bodyTop = y + panelHead;
    const bodyH = variant.rows.length * rowH;
    // Grid: every 0.5x, the 1x line dashed.
    for (let t = 0; t <= maxRatio + 1e-9; t += 0.5) {
      const gx = x(t);
      parts.push(
        `<line x1="${gx}" y1="${bodyTop - 4}" x2="${gx}" y2="${bodyTop + bodyH}" stroke="${t === 1 ? colors.baseline : colors.grid}" stroke-width="1"${t === 1 ? ' stroke-dasharray="4 3"' : ''}/>`,
        `<text x="${gx}" y="${bodyTop - 8}" font-size="10" text-anchor="middle" fill="${colors.muted}">${t.toFixed(1)}x</text>`,
      );
    }
    for (const [i, row] of variant.rows.entries()) {
      const ry = bodyTop + i * rowH;
      const kind = kinds.get(row.id) ?? 'peer';
      const failed = row.windows.length === 0;
      parts.push(
        `<text x="${labelW - 8}" y="${ry + 14}" font-size="12" text-anchor="end" fill="${colors.text}"${kind === 'ours' ? ' font-weight="bold"' : ''}>${esc(row.label)}</text>`,
      );
      if (failed) {
        parts.push(
          `<text x="${labelW + 4}" y="${ry + 14}" font-size="11" fill="${colors.starved}">failed: ${esc(row.error ?? 'no data')}</text>`,
        );
        continue;
      }
      const value = barRatio(row, toFifo);
      const w = Math.max(1, x(Number.isFinite(value) ? value : 0) - labelW);
      parts.push(
        `<rect x="${labelW}" y="${ry + 3}" width="${w.toFixed(1)}" height="${rowH - 6}" fill="${colors[kind]}" rx="2"><title>${esc(`${row.label}: ${Math.round(row.acquisitionsPerSec)} acquisitions/s (${num(value)}x ${yardstick})`)}</title></rect>`,
      );
      const starved = row.worstStarved > 0;
      const note =
        `${num(value)}x · fairness ${num(row.fairness)} · ` +
        `hand-off p50 ${ms(row.handoffP50)} ms · worst window: starved ${num(row.worstStarved, 0)}, longest wait ${ms(row.worstLongestWaitMs)} ms`;
      parts.push(
        `<text x="${labelW + barW + 14}" y="${ry + 14}" font-size="11" fill="${starved ? colors.starved : colors.muted}">${esc(note)}</text>`,
      );
    }
    y = bodyTop + bodyH + panelGap;
  }
  const height = y + 40;
  const legend = [
    ['ours', 'this library'],
    ['baseline', 'raw ioredis baselines'],
    ['peer', 'peers'],
  ] as const;
  const legendParts = legend.map(
    ([kind, text], i) =>
      `<rect x="${12 + i * 190}" y="${height - 26}" width="12" height="12" fill="${colors[kind]}"/>` +
      `<text x="${30 + i * 190}" y="${height - 16}" font-size="12" fill="${colors.text}">${text}</text>`,
  );
  legendParts.push(
    `<text x="${12 + 3 * 190}" y="${height - 16}" font-size="12" fill="${colors.starved}">red note: a contender starved in some window</text>`,
  );
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="Helvetica, Arial, sans-serif">`,
    `<rect width="100%" height="100%" fill="#ffffff"/>`,
    `<text x="12" y="24" font-size="18" font-weight="bold" fill="${colors.text}">C: one key, ${c.contenders} contenders: acquisitions/s relative to the ${yardstick} ${toFifo ? 'hand-off' : 'baseline'}</text>`,
    `<text x="12" y="44" font-size="12" fill="${colors.muted}">${esc(subtitle)}</text>`,
    ...parts,
    ...legendParts,
    '</svg>',
    '',
  ].join('\n');
}
