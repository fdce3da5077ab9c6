#!/usr/bin/env node
// Builds the publishable library libs/distributed-lock into libs/distributed-lock/dist:
// compiles src with tsc (tsconfig.lib.json), copies the Lua scripts next to the
// compiled code (tsc ignores them), copies docs/guarantees.md to
// dist/guarantees.md (the package README links to it there: a link out of the
// package directory would break inside the npm tarball), and checks that every
// file the package's "exports" point at was produced.
import { spawnSync } from 'node:child_process';
import { copyFile, mkdir, readdir, readFile, rm, stat } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const libDir = path.join(root, 'libs', 'distributed-lock');
const srcDir = path.join(libDir, 'src');
const distDir = path.join(libDir, 'dist');
const tsconfig = path.join(libDir, 'tsconfig.lib.json');
const guarantees = path.join(root, 'docs', 'guarantees.md');

const relative = (file) => path.relative(root, file) || '.';

function fail(message) {
  console.error(`build-lib: ${message}`);
  process.exit(1);
}

/** Every file under `dir` (recursively) whose name ends with `extension`. */
async function findFiles(dir, extension) {
  const entries = await readdir(dir, { withFileTypes: true, recursive: true });
  return entries
    .filter((entry) => entry.isFile() && entry.name.endsWith(extension))
    .map((entry) => path.join(entry.parentPath ?? entry.path, entry.name))
    .toSorted();
}

/** Every path named in a package.json "exports" value, e.g. ./dist/index.js. */
function exportTargets(exportsField) {
  if (typeof exportsField === 'string') return [exportsField];
  if (exportsField === null || typeof exportsField !== 'object') return [];
  return Object.values(exportsField).flatMap(exportTargets);
}

async function exists(file) {
  try {
    await stat(file);
    return true;
  } catch {
    return false;
  }
}

if (!(await exists(srcDir))) fail(`${relative(srcDir)} does not exist`);

// 1. Start from an empty dist so deleted sources leave no stale output behind.
await rm(distDir, { recursive: true, force: true });

// 2. Compile with the TypeScript compiler installed in this repository.
const require = createRequire(import.meta.url);
const tsc = path.join(
  path.dirname(require.resolve('typescript/package.json')),
  'bin',
  'tsc',
);
console.log(`build-lib: tsc -p ${relative(tsconfig)}`);
const compile = spawnSync(process.execPath, [tsc, '-p', tsconfig], {
  cwd: root,
  stdio: 'inherit',
});
if (compile.error) fail(`could not run tsc: ${compile.error.message}`);
if (compile.status !== 0) {
  fail(`tsc failed (${compile.signal ?? `exit code ${compile.status}`})`);
}

// 3. Copy the Lua scripts, keeping their place relative to src.
const luaFiles = await findFiles(srcDir, '.lua');
for (const file of luaFiles) {
  const target = path.join(distDir, path.relative(srcDir, file));
  await mkdir(path.dirname(target), { recursive: true });
  await copyFile(file, target);
}
console.log(
  `build-lib: copied ${luaFiles.length} Lua script(s) to ${relative(distDir)}`,
);

// 4. The guarantees page, which the package README links to as dist/guarantees.md.
if (!(await exists(guarantees))) fail(`${relative(guarantees)} does not exist`);
await copyFile(guarantees, path.join(distDir, 'guarantees.md'));
console.log(
  `build-lib: copied ${relative(guarantees)} to ${relative(path.join(distDir, 'guarantees.md'))}`,
);

// 5. The package must contain what its "exports" promise.
const manifest = JSON.parse(
  await readFile(path.join(libDir, 'package.json'), 'utf8'),
);
const missing = [];
for (const target of exportTargets(manifest.exports)) {
  if (!(await exists(path.join(libDir, target)))) missing.push(target);
}
if (missing.length > 0) {
  fail(
    `the build did not produce ${missing.join(', ')}, which package.json "exports" ` +
      `point at (is ${relative(path.join(srcDir, 'index.ts'))} missing?)`,
  );
}

const emitted = await findFiles(distDir, '.js');
console.log(
  `build-lib: built ${manifest.name}@${manifest.version} into ${relative(distDir)} ` +
    `(${emitted.length} JavaScript file(s))`,
);
