#!/usr/bin/env node
// `npm run build:app`: builds the flash-sale app into dist/apps/flash-sale as
// plain ESM that `node` runs without any loader:
//
//   dist/apps/flash-sale/main.js                  the app (from apps/flash-sale/src)
//   dist/apps/flash-sale/database/embedded-db-server.js
//   dist/apps/flash-sale/libs/distributed-lock/   the lock library (from libs/distributed-lock/src)
//
// 1. type-checks with tsc (apps/flash-sale/tsconfig.app.json; --no-typecheck skips it),
// 2. compiles every .ts with SWC (legacy decorators with metadata, as Nest needs),
// 3. rewrites imports of the `@app/distributed-lock` path alias to relative
//    paths into the compiled library, so no alias resolution is needed at run time,
// 4. copies the .lua scripts of both, and the web page's files (src/web/public),
//    next to the compiled code that reads them.
import { spawnSync } from 'node:child_process';
import { copyFile, mkdir, readdir, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { transformFile } from '@swc/core';

const root = path.resolve(
  path.dirname(fileURLToPath(import.meta.url)),
  '../../..',
);
const outDir = path.join(root, 'dist', 'apps', 'flash-sale');
const libOutDir = path.join(outDir, 'libs', 'distributed-lock');
const sources = [
  { from: path.join(root, 'apps', 'flash-sale', 'src'), to: outDir },
  { from: path.join(root, 'libs', 'distributed-lock', 'src'), to: libOutDir },
];

const relative = (file) => path.relative(root, file) || '.';

function fail(message) {
  console.error(`build-app: ${message}`);
  process.exit(1);
}

async function filesUnder(dir, predicate) {
  const entries = await readdir(dir, { withFileTypes: true, recursive: true });
  return entries
    .filter((entry) => entry.isFile() && predicate(entry.name))
    .map((entry) => path.join(entry.parentPath ?? entry.path, entry.name))
    .toSorted();
}

// 1. Type-check.
if (!process.argv.includes('--no-typecheck')) {
  const require = createRequire(import.meta.url);
  const tsc = path.join(
    path.dirname(require.resolve('typescript/package.json')),
    'bin',
    'tsc',
  );
  const tsconfig = path.join(root, 'apps', 'flash-sale', 'tsconfig.app.json');
  console.log(`build-app: tsc --noEmit -p ${relative(tsconfig)}`);
  const check = spawnSync(process.execPath, [tsc, '--noEmit', '-p', tsconfig], {
    cwd: root,
    stdio: 'inherit',
  });
  if (check.status !== 0) fail('type errors (see above)');
}

await rm(outDir, { recursive: true, force: true });

/** The specifier that replaces `@app/distributed-lock[/sub]` in a file compiled to `outFile`. */
function aliasTarget(outFile, subpath) {
  const target = subpath
    ? path.join(libOutDir, subpath.replace(/\.ts$/, '') + '.js')
    : path.join(libOutDir, 'index.js');
  let specifier = path
    .relative(path.dirname(outFile), target)
    .split(path.sep)
    .join('/');
  if (!specifier.startsWith('.')) specifier = `./${specifier}`;
  return specifier;
}

// 2. + 3. Compile.
let compiled = 0;
for (const { from, to } of sources) {
  const files = await filesUnder(
    from,
    (name) =>
      name.endsWith('.ts') &&
      !name.endsWith('.spec.ts') &&
      !name.endsWith('.test-support.ts') &&
      !name.endsWith('.d.ts'),
  );
  for (const file of files) {
    const outFile = path
      .join(to, path.relative(from, file))
      .replace(/\.ts$/, '.js');
    const output = await transformFile(file, {
      swcrc: false,
      configFile: false,
      sourceMaps: true,
      sourceFileName: path.relative(path.dirname(outFile), file),
      module: { type: 'es6' },
      jsc: {
        target: 'es2022',
        parser: { syntax: 'typescript', decorators: true },
        transform: { legacyDecorator: true, decoratorMetadata: true },
        keepClassNames: true,
      },
    });
    const code = output.code.replace(
      /(['"])@app\/distributed-lock(?:\/([^'"]+))?\1/g,
      (_match, quote, subpath) =>
        `${quote}${aliasTarget(outFile, subpath)}${quote}`,
    );
    await mkdir(path.dirname(outFile), { recursive: true });
    await writeFile(
      outFile,
      `${code}\n//# sourceMappingURL=${path.basename(outFile)}.map\n`,
    );
    if (output.map) await writeFile(`${outFile}.map`, output.map);
    compiled += 1;
  }
}

// 4. Lua scripts and the web page's static files, read at run time next to
//    the modules that use them.
const isAsset = (file) =>
  file.endsWith('.lua') ||
  file.split(path.sep).join('/').includes('/web/public/');
let scripts = 0;
let assets = 0;
for (const { from, to } of sources) {
  for (const file of await filesUnder(from, () => true)) {
    if (!isAsset(file)) continue;
    const target = path.join(to, path.relative(from, file));
    await mkdir(path.dirname(target), { recursive: true });
    await copyFile(file, target);
    if (file.endsWith('.lua')) scripts += 1;
    else assets += 1;
  }
}

console.log(
  `build-app: compiled ${compiled} file(s) and copied ${scripts} Lua script(s) and ${assets} web file(s) into ${relative(outDir)}; ` +
    `run it with: node ${relative(path.join(outDir, 'main.js'))}`,
);
