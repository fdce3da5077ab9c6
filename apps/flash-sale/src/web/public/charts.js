// Live time-series charts of the page, drawn by uPlot (served by the app at
// /assets/uplot.js). Each chart keeps its own window of points; a series
// appears when a name first has a value and goes once it has none left in the
// window. Plain browser JavaScript, no build step.
'use strict';
/** Points kept per chart: about two minutes at one snapshot every 500 ms. */
const CHART_POINTS = 240;

const CHART_PALETTE = [
  '#2563eb',
  '#db2777',
  '#16a34a',
  '#ea580c',
  '#7c3aed',
  '#0891b2',
  '#ca8a04',
  '#dc2626',
  '#4b5563',
  '#65a30d',
];

/**
 * A chart in `container`. `options.colors` fixes the colour of known series
 * names, `options.labels` names them; `options.unit` is appended to values,
 * shown with `options.decimals`; `options.points` marks every point.
 */
function createTimeChart(container, options = {}) {
  const times = [];
  /** name -> values, aligned with `times`. */
  const columns = new Map();
  let plot = null;
  let plotted = '';

  const colorOf = (name, index) =>
    options.colors?.[name] ?? CHART_PALETTE[index % CHART_PALETTE.length];
  const label = options.labels ?? ((name) => name);
  const format = (value) =>
    value === null || value === undefined
      ? '–'
      : `${Number(value).toFixed(options.decimals ?? 0)}${options.unit ?? ''}`;

  function size() {
    return {
      width: Math.max(200, container.clientWidth),
      height: options.height ?? 160,
    };
  }

  function draw() {
    const names = [...columns.keys()];
    const data = [times.slice(), ...names.map((name) => columns.get(name))];
    const signature = names.join('\u0000');
    if (plot && signature === plotted) {
      plot.setData(data);
      return;
    }
    plot?.destroy();
    plotted = signature;
    plot = new uPlot(
      {
        ...size(),
        legend: { live: false },
        cursor: { drag: { x: false, y: false } },
        scales: { x: { time: true }, y: { range: chartYRange } },
        axes: [
          { stroke: '#6b7280', grid: { stroke: '#e5e7eb' } },
          {
            stroke: '#6b7280',
            grid: { stroke: '#e5e7eb' },
            size: 64,
            values: (_u, ticks) =>
              ticks.map((tick) => `${+tick.toFixed(2)}${options.unit ?? ''}`),
          },
        ],
        series: [
          {},
          ...names.map((name, index) => ({
            label: label(name),
            stroke: colorOf(name, index),
            width: 2,
            spanGaps: false,
            // Sparse series (a few purchases) show as dots.
            points: { show: options.points ?? false, size: 5 },
            value: (_u, value) => format(value),
          })),
        ],
      },
      data,
      container,
    );
  }

  /** Adds the point at `seconds` (epoch): `values` by series name, null or absent for none. */
  function push(seconds, values) {
    if (times.length > 0 && seconds <= times[times.length - 1]) return;
    times.push(seconds);
    for (const name of Object.keys(values)) {
      if (!columns.has(name) && values[name] !== null) {
        columns.set(
          name,
          Array.from({ length: times.length - 1 }, () => null),
        );
      }
    }
    for (const [name, column] of columns) {
      const value = values[name];
      column.push(value === undefined ? null : value);
    }
    if (times.length > CHART_POINTS) {
      times.shift();
      for (const column of columns.values()) column.shift();
    }
    for (const [name, column] of columns) {
      if (column.every((value) => value === null)) columns.delete(name);
    }
    draw();
  }

  new ResizeObserver(() => plot?.setSize(size())).observe(container);
  return { push, series: () => [...columns.keys()] };
}

/** From 0, with some room above the highest value (at least 1). */
function chartYRange(_u, _min, max) {
  return [0, Math.max(1, max * 1.1)];
}

/**
 * The `q` quantile, in ms, of histogram counts per bucket (not cumulative;
 * upper bounds `boundsMs`, the last bucket above them), interpolated within
 * its bucket; null without counts.
 */
function bucketQuantile(counts, boundsMs, q) {
  const total = counts.reduce((sum, n) => sum + n, 0);
  if (total === 0) return null;
  const rank = q * total;
  let below = 0;
  for (let i = 0; i < counts.length; i += 1) {
    if (below + counts[i] >= rank && counts[i] > 0) {
      const lower = i === 0 ? 0 : boundsMs[i - 1];
      if (i >= boundsMs.length) return lower;
      return lower + ((boundsMs[i] - lower) * (rank - below)) / counts[i];
    }
    below += counts[i];
  }
  return boundsMs[boundsMs.length - 1];
}

window.saleCharts = { createTimeChart, bucketQuantile };
