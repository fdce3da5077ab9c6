#!/usr/bin/env node
// Keeps the tables of the package's own README (libs/distributed-lock/README.md)
// equal to the repository README's, which are the source of truth.
//
// In the package README a synced table sits between two comments:
//
//   <!-- sync: README.md "## Module options" (...) -->
//   | Option | Default | Meaning |
//   ...
//   <!-- /sync -->
//
// The quoted text is the start of a line of README.md (a heading, or the
// sentence before the table); the table copied is the first one after that
// line, outside code blocks.
//
//   node scripts/package-readme.mjs          rewrites the package README's tables
//   node scripts/package-readme.mjs --check  fails when any of them is stale
//
// The result is formatted with the repository's Prettier settings, so that
// this check and `npm run format:check` never disagree.
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as prettier from 'prettier';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const sourceFile = path.join(root, 'README.md');
const targetFile = path.join(root, 'libs', 'distributed-lock', 'README.md');
const check = process.argv.includes('--check');

const syncBlock =
  /(<!-- sync: README\.md "([^"]+)"[^\n]*-->\n)([\s\S]*?)(<!-- \/sync -->)/g;

function fail(message) {
  console.error(`package-readme: ${message}`);
  process.exit(1);
}

/** The first Markdown table after the line of `markdown` that starts with `anchor`. */
function tableAfter(markdown, anchor) {
  const lines = markdown.split('\n');
  let inCode = false;
  let start = -1;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    if (line.startsWith('```')) {
      inCode = !inCode;
      continue;
    }
    if (inCode) continue;
    if (start < 0) {
      if (line.startsWith(anchor)) start = i;
      continue;
    }
    if (line.startsWith('|')) {
      let end = i;
      while (end < lines.length && lines[end].startsWith('|')) end++;
      return lines.slice(i, end).join('\n');
    }
  }
  if (start < 0) fail(`README.md has no line starting with ${anchor}`);
  return fail(`README.md has no table after the line ${anchor}`);
}

const source = await readFile(sourceFile, 'utf8');
const current = await readFile(targetFile, 'utf8');

const anchors = [];
const synced = current.replace(
  syncBlock,
  (_match, open, anchor, _old, close) => {
    anchors.push(anchor);
    return `${open}\n${tableAfter(source, anchor)}\n\n${close}`;
  },
);
if (anchors.length === 0) {
  fail(`${path.relative(root, targetFile)} has no <!-- sync: ... --> block`);
}

const options = (await prettier.resolveConfig(targetFile)) ?? {};
const formatted = await prettier.format(synced, {
  ...options,
  filepath: targetFile,
});

const relativeTarget = path.relative(root, targetFile);
/** Each sync block's anchor and content, in order. */
const blocks = (markdown) =>
  [...markdown.matchAll(syncBlock)].map((match) => [match[2], match[3]]);

if (check) {
  if (formatted !== current) {
    const before = new Map(blocks(current));
    const stale = blocks(formatted)
      .filter(([anchor, table]) => before.get(anchor) !== table)
      .map(([anchor]) => anchor);
    fail(
      `${relativeTarget} is out of date with README.md` +
        (stale.length > 0 ? ` (the tables after: ${stale.join('; ')})` : '') +
        ': run `npm run readme:package`',
    );
  }
  console.log(
    `package-readme: ${relativeTarget} has README.md's ${anchors.length} tables`,
  );
} else {
  if (formatted !== current) await writeFile(targetFile, formatted);
  console.log(
    `package-readme: ${formatted === current ? 'unchanged' : 'updated'} ${relativeTarget} ` +
      `(${anchors.length} tables from README.md)`,
  );
}
