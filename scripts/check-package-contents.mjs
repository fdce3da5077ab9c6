#!/usr/bin/env node
// Checks what `npm pack` put into the library's tarball (scripts/check-package.sh
// runs it on the `npm pack --json` output):
// - no tests: no *.spec.*, *.test-support.*, test/ or *.tsbuildinfo file;
// - every file package.json "exports" (and "main", "types") names;
// - every compiled .js has its .d.ts and source map, every .lua script of src
//   is at the same place under dist (the backends read them at run time);
// - the README, and every file it links to inside the package;
// - peer ranges that match what the check tests: with `--tested
//   <name>=<version>[,<version>...]`, every tested version is in the peer's
//   range, every major version the range admits is one of them, and every
//   peer dependency has a tested version.
//
//   node scripts/check-package-contents.mjs <pack.json> \
//     [--tested @nestjs/common=12.5.1,11.2.10 ...]
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const libDir = path.join(root, 'libs', 'distributed-lock');

const [packJson, ...rest] = process.argv.slice(2);
if (!packJson) {
  console.error(
    'usage: check-package-contents.mjs <pack.json> [--tested name=v1,v2 ...]',
  );
  process.exit(2);
}
const tested = new Map();
for (let i = 0; i < rest.length; i++) {
  if (rest[i] !== '--tested' || !rest[i + 1]) {
    console.error(`check-package-contents: unexpected argument ${rest[i]}`);
    process.exit(2);
  }
  const [name, versions] = rest[++i].split(/=(?=[^=]*$)/);
  tested.set(name, versions.split(','));
}

const [pack] = JSON.parse(await readFile(packJson, 'utf8'));
const files = new Set(pack.files.map((file) => file.path));
const manifest = JSON.parse(
  await readFile(path.join(libDir, 'package.json'), 'utf8'),
);
const problems = [];

// 1. Nothing that belongs to the tests.
const testFile = /(\.spec\.|\.test-support\.|(^|\/)tests?\/|\.tsbuildinfo$)/;
for (const file of files) {
  if (testFile.test(file)) problems.push(`${file} is a test file`);
}

// 2. What package.json promises.
const targets = (value) =>
  typeof value === 'string'
    ? [value]
    : value && typeof value === 'object'
      ? Object.values(value).flatMap(targets)
      : [];
for (const target of [
  manifest.main,
  manifest.types,
  ...targets(manifest.exports),
]) {
  if (target && !files.has(path.posix.normalize(target)))
    problems.push(`${target}, named in package.json, is not in the package`);
}

// 3. Declarations and source maps beside every module, and the Lua scripts.
for (const file of files) {
  if (!file.endsWith('.js')) continue;
  for (const companion of [file.replace(/\.js$/, '.d.ts'), `${file}.map`]) {
    if (!files.has(companion)) problems.push(`${file} has no ${companion}`);
  }
}
const srcDir = path.join(libDir, 'src');
const lua = (await readdir(srcDir, { recursive: true }))
  .filter((file) => file.endsWith('.lua'))
  .map((file) => path.posix.join('dist', file.split(path.sep).join('/')));
if (lua.length === 0) problems.push('src has no .lua script (moved?)');
for (const file of lua) {
  if (!files.has(file))
    problems.push(`${file} is missing (the backends read it)`);
}

// 4. The README and what it links to.
if (!files.has('README.md')) problems.push('README.md is missing');
else {
  const readme = await readFile(path.join(libDir, 'README.md'), 'utf8');
  for (const [, target] of readme.matchAll(/\]\(([^)\s]+)\)/g)) {
    if (/^[a-z]+:|^#/i.test(target)) continue;
    const file = path.posix.normalize(target.split('#')[0]);
    if (!files.has(file))
      problems.push(
        `README.md links to ${target}, which is not in the package`,
      );
  }
}

// 5. Peer ranges against the versions tested. Only caret ranges joined by
// `||` are understood; anything else is reported rather than guessed at.
const parse = (version) => version.split('.').map(Number);
// What a caret range keeps fixed: the major version, or 0.minor below 1.0.
const caretKey = (version) => {
  const [major, minor] = parse(version);
  return major > 0 ? `${major}.x` : `0.${minor}.x`;
};
const atLeast = (version, floor) => {
  const [a, b] = [parse(version), parse(floor)];
  for (let i = 0; i < 3; i++) if (a[i] !== b[i]) return a[i] > b[i];
  return true;
};
if (tested.size > 0) {
  for (const name of Object.keys(manifest.peerDependencies ?? {})) {
    if (!tested.has(name))
      problems.push(`${name} is a peer dependency but no version was tested`);
  }
}
for (const [name, versions] of tested) {
  const range = manifest.peerDependencies?.[name];
  if (!range) {
    problems.push(`${name} is tested but is not a peer dependency`);
    continue;
  }
  const floors = range.split('||').map((part) => part.trim());
  if (!floors.every((floor) => /^\^\d+\.\d+\.\d+$/.test(floor))) {
    problems.push(
      `${name}: cannot check the range ${range} (expected ^x.y.z || ...)`,
    );
    continue;
  }
  const bounds = floors.map((floor) => floor.slice(1));
  for (const version of versions) {
    const inRange = bounds.some(
      (bound) =>
        caretKey(bound) === caretKey(version) && atLeast(version, bound),
    );
    if (!inRange)
      problems.push(
        `${name}@${version} is tested but outside the peer range ${range}`,
      );
  }
  for (const bound of bounds) {
    if (!versions.some((version) => caretKey(version) === caretKey(bound)))
      problems.push(
        `${name}: the peer range ${range} admits ${caretKey(bound)}, which is not tested`,
      );
  }
}

if (problems.length > 0) {
  for (const problem of problems) console.error(`package contents: ${problem}`);
  process.exit(1);
}
console.log(
  `package contents: ${pack.name}@${pack.version}, ${files.size} files, ` +
    `${(pack.size / 1024).toFixed(1)} kB packed, ${(pack.unpackedSize / 1024).toFixed(1)} kB unpacked: ` +
    `no test files, ${lua.length} Lua scripts, a .d.ts and a source map per module` +
    (tested.size > 0 ? `, peer ranges match the tested versions` : ''),
);
