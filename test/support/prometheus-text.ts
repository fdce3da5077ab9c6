/**
 * A reader of the Prometheus text exposition format (version 0.0.4), enough
 * to check a real scrape: samples with labels, `# TYPE` lines, and sums over
 * the samples of a metric that match some labels.
 */

export interface Sample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

export interface Scrape {
  readonly samples: readonly Sample[];
  /** Metric name → its declared type (`counter`, `gauge`, `histogram`...). */
  readonly types: ReadonlyMap<string, string>;
  /** Sum of the samples named `name` whose labels include `labels`; 0 if none. */
  sum(name: string, labels?: Record<string, string>): number;
  /** The label values of `label` on samples named `name`, distinct and sorted. */
  values(name: string, label: string): string[];
}

const sampleLine =
  /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+-?\d+)?$/;
const labelPair = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*,?/gy;

/** Parses `text`; throws on any line that is not valid exposition format. */
export function parsePrometheusText(text: string): Scrape {
  const samples: Sample[] = [];
  const types = new Map<string, string>();
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    if (line.startsWith('#')) {
      const type = /^# TYPE (\S+) (\S+)$/.exec(line);
      if (type) types.set(type[1], type[2]);
      else if (!line.startsWith('# HELP '))
        throw new Error(`Bad comment line: ${line}`);
      continue;
    }
    const match = sampleLine.exec(line);
    if (!match) throw new Error(`Bad sample line: ${line}`);
    const [, name, labelText = '', valueText] = match;
    samples.push({
      name,
      labels: parseLabels(labelText, line),
      value: parseValue(valueText, line),
    });
  }
  const matching = (name: string, labels: Record<string, string> = {}) =>
    samples.filter(
      (s) =>
        s.name === name &&
        Object.entries(labels).every(([k, v]) => s.labels[k] === v),
    );
  return {
    samples,
    types,
    sum: (name, labels) =>
      matching(name, labels).reduce((total, s) => total + s.value, 0),
    values: (name, label) =>
      [
        ...new Set(
          matching(name).flatMap((s) =>
            s.labels[label] === undefined ? [] : [s.labels[label]],
          ),
        ),
      ].toSorted(),
  };
}

function parseLabels(text: string, line: string): Record<string, string> {
  const labels: Record<string, string> = {};
  labelPair.lastIndex = 0;
  while (labelPair.lastIndex < text.length) {
    const pair = labelPair.exec(text);
    if (!pair) throw new Error(`Bad labels in: ${line}`);
    labels[pair[1]] = pair[2].replace(/\\(.)/g, (_, c: string) =>
      c === 'n' ? '\n' : c,
    );
  }
  return labels;
}

function parseValue(text: string, line: string): number {
  if (text === '+Inf') return Infinity;
  if (text === '-Inf') return -Infinity;
  if (text === 'NaN') return NaN;
  const value = Number(text);
  if (Number.isNaN(value)) throw new Error(`Bad value in: ${line}`);
  return value;
}
