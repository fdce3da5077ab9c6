#!/usr/bin/env node
// The package's API reference: TypeDoc (typedoc.json) over what
// libs/distributed-lock/src/index.ts exports, as Markdown, into docs/api.
//
//   node scripts/api-docs.mjs          regenerates docs/api (npm run docs:api)
//   node scripts/api-docs.mjs --check  generates into a temporary directory and
//                                      fails when docs/api differs from it
//                                      (npm run check:api-docs)
//
// TypeDoc treats its warnings as errors (typedoc.json): a public member whose
// type is not exported, or a {@link} to something not in the reference, fails.
import { spawnSync } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const docsDir = path.join(root, 'docs', 'api');
const check = process.argv.includes('--check');

const require = createRequire(import.meta.url);
const typedocDir = path.dirname(require.resolve('typedoc/package.json'));
const typedoc = path.join(
  typedocDir,
  require('typedoc/package.json').bin.typedoc,
);

function fail(message) {
  console.error(`api-docs: ${message}`);
  process.exit(1);
}

/** Runs TypeDoc with typedoc.json, writing to `out`. */
function generate(out) {
  const run = spawnSync(
    process.execPath,
    [typedoc, '--out', out, '--logLevel', 'Warn'],
    {
      cwd: root,
      stdio: 'inherit',
    },
  );
  if (run.error) fail(`could not run TypeDoc: ${run.error.message}`);
  if (run.status !== 0) {
    fail(
      `TypeDoc failed (${run.signal ?? `exit code ${run.status}`}); its warnings count as ` +
        'errors: fix the TSDoc comments (or export the types) it names above',
    );
  }
}

/** Every file under `dir`, relative to it, sorted; none when `dir` is missing. */
async function listFiles(dir) {
  try {
    const entries = await readdir(dir, {
      withFileTypes: true,
      recursive: true,
    });
    return entries
      .filter((entry) => entry.isFile())
      .map((entry) =>
        path.relative(
          dir,
          path.join(entry.parentPath ?? entry.path, entry.name),
        ),
      )
      .toSorted();
  } catch (error) {
    if (error.code === 'ENOENT') return [];
    throw error;
  }
}

/** The first line where `a` and `b` differ, 1-based. */
function firstDifference(a, b) {
  const [linesA, linesB] = [a.split('\n'), b.split('\n')];
  let line = 0;
  while (line < linesA.length && linesA[line] === linesB[line]) line++;
  return { line: line + 1, committed: linesA[line], generated: linesB[line] };
}

if (!check) {
  generate(docsDir);
  const files = await listFiles(docsDir);
  console.log(
    `api-docs: wrote ${files.length} files to ${path.relative(root, docsDir)}`,
  );
  process.exit(0);
}

const scratch = await mkdtemp(path.join(os.tmpdir(), 'api-docs-'));
try {
  generate(scratch);
  const [committed, generated] = await Promise.all([
    listFiles(docsDir),
    listFiles(scratch),
  ]);
  const problems = [];
  for (const file of generated) {
    if (!committed.includes(file)) problems.push(`missing: docs/api/${file}`);
  }
  for (const file of committed) {
    if (!generated.includes(file))
      problems.push(`no longer generated: docs/api/${file}`);
  }
  for (const file of generated.filter((f) => committed.includes(f))) {
    const [before, after] = await Promise.all([
      readFile(path.join(docsDir, file), 'utf8'),
      readFile(path.join(scratch, file), 'utf8'),
    ]);
    if (before === after) continue;
    const {
      line,
      committed: was,
      generated: now,
    } = firstDifference(before, after);
    problems.push(
      `out of date: docs/api/${file}, line ${line}:\n` +
        `      committed: ${JSON.stringify(was ?? '(end of file)')}\n` +
        `      generated: ${JSON.stringify(now ?? '(end of file)')}`,
    );
  }
  if (problems.length > 0) {
    const shown = problems.slice(0, 20);
    if (problems.length > shown.length)
      shown.push(`... and ${problems.length - 20} more`);
    fail(
      `docs/api does not match the TSDoc comments of libs/distributed-lock/src:\n` +
        shown.map((problem) => `  - ${problem}`).join('\n') +
        '\nRun `npm run docs:api` and commit docs/api.',
    );
  }
  console.log(`api-docs: docs/api is up to date (${generated.length} files)`);
} finally {
  await rm(scratch, { recursive: true, force: true });
}
