import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { contenders } from './contenders/index.js';

export const repoRoot = fileURLToPath(new URL('../', import.meta.url));
export const allScenarios = [
  'A',
  'B',
  'C',
  'D',
  'E',
  'F',
  'G',
  'H',
  'I',
  'J',
] as const;
export type Scenario = (typeof allScenarios)[number];

function usage(): string {
  return [
    'Usage: npm run bench [-- --only A,C --out DIR]',
    '       npm run bench:smoke',
    '',
    '  --smoke       short slices, one repetition, ~20,000 soak cycles (about a minute)',
    '  --only LIST   scenarios to run, e.g. A,C (default: A,B,C,D,E,F,G,H,I,J)',
    '  --out DIR     where the report goes (default: docs/benchmarks, smoke: .bench-output/smoke)',
    '  --contenders LIST  only these contenders besides the baselines, e.g. ours-service,redlock5',
    '  --render FILE rewrite the report and chart from a JSON file of an earlier run (no benchmark)',
  ].join('\n');
}

export interface Cli {
  readonly smoke: boolean;
  readonly only: Scenario[];
  readonly out: string;
  readonly render?: string;
  /** The scenario's contenders, cut down to the picked ones (baselines, and what a picked one is compared with, stay). */
  pick(ids: readonly string[]): readonly string[];
  readonly contenders?: string;
}

/** The command line; exits with usage on unknown scenarios or contenders. */
export function parseCli(): Cli {
  const { values } = parseArgs({
    options: {
      smoke: { type: 'boolean', default: false },
      only: { type: 'string' },
      out: { type: 'string' },
      render: { type: 'string' },
      contenders: { type: 'string' },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    process.stdout.write(`${usage()}\n`);
    process.exit(0);
  }
  const only = values.only
    ? values.only.split(',').map((s) => s.trim().toUpperCase())
    : [...allScenarios];
  const unknown = only.filter((s) => !allScenarios.includes(s as Scenario));
  if (unknown.length > 0) {
    process.stderr.write(
      `Unknown scenario(s): ${unknown.join(', ')}\n${usage()}\n`,
    );
    process.exit(2);
  }
  const smoke = values.smoke;
  const out = path.resolve(
    repoRoot,
    values.out ?? (smoke ? '.bench-output/smoke' : 'docs/benchmarks'),
  );
  const picked = values.contenders?.split(',').map((s) => s.trim());
  const unknownContenders = (picked ?? []).filter((id) => !contenders.has(id));
  if (unknownContenders.length > 0) {
    process.stderr.write(
      `Unknown contender(s): ${unknownContenders.join(', ')}; known: ${[...contenders.keys()].join(', ')}\n`,
    );
    process.exit(2);
  }
  const kept = (id: string) =>
    picked === undefined ||
    picked.includes(id) ||
    contenders.get(id)?.kind === 'baseline' ||
    picked.some((p) => contenders.get(p)?.comparedWith === id);
  return {
    smoke,
    only: only as Scenario[],
    out,
    render: values.render,
    pick: (ids) => ids.filter(kept),
    contenders: values.contenders,
  };
}

/** The command line that reproduces this run. */
export function benchCommand(cli: Cli): string {
  const args = [
    ...(cli.only.length < allScenarios.length
      ? ['--only', cli.only.join(',')]
      : []),
    ...(cli.contenders ? ['--contenders', cli.contenders] : []),
  ];
  const script = cli.smoke ? 'bench:smoke' : 'bench';
  return `npm run ${script}${args.length > 0 ? ` -- ${args.join(' ')}` : ''}`;
}
