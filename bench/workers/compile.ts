import { createHash } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  transformSync,
  version as swcVersion,
  type JscTarget,
  type Options,
} from '@swc/core';

const repoRoot = fileURLToPath(new URL('../../', import.meta.url));
/** Everything a worker may import, compiled whole and laid out as in the repository. */
const sourceDirs = ['bench', 'libs/distributed-lock/src'];
const buildsDir = path.join(repoRoot, '.bench-output', 'workers');
const keepUnusedBuildMs = 24 * 60 * 60 * 1000;

let workerFile: string | undefined;

/**
 * bench-worker.ts compiled to JavaScript, for worker processes started with
 * plain `node`: through @swc-node/register each start cost about two seconds
 * more of CPU (the loader reads tsconfig.json with `typescript`, then compiles
 * every module). Compiles once per state of the sources; later runs reuse it.
 */
export function compiledWorkerFile(): string {
  workerFile ??= path.join(
    currentBuild(),
    'bench',
    'workers',
    'bench-worker.js',
  );
  return workerFile;
}

/** The options @swc-node/register derives from tsconfig.json. */
function swcOptions(): Options {
  const { compilerOptions } = JSON.parse(
    readFileSync(path.join(repoRoot, 'tsconfig.json'), 'utf8'),
  ) as {
    compilerOptions: { target: string; paths: Record<string, string[]> };
  };
  return {
    swcrc: false,
    // resolveFully: `@app/...` imports become relative `.js` ones.
    module: { type: 'es6', resolveFully: true },
    jsc: {
      target: compilerOptions.target.toLowerCase() as JscTarget,
      keepClassNames: true,
      baseUrl: path.resolve(repoRoot),
      paths: compilerOptions.paths,
      parser: { syntax: 'typescript', decorators: true },
      transform: {
        legacyDecorator: true,
        decoratorMetadata: true,
        useDefineForClassFields: true,
      },
    },
  };
}

/** The build of the current sources, made when missing. */
function currentBuild(): string {
  const options = swcOptions();
  const sources = new Map(
    sourceDirs
      .flatMap(filesUnder)
      .map((file) => [file, readFileSync(path.join(repoRoot, file))]),
  );
  const hash = createHash('sha256').update(
    `${swcVersion}\0${JSON.stringify(options)}`,
  );
  for (const [file, content] of sources)
    hash.update(`\0${file}\0`).update(content);
  const dir = path.join(buildsDir, hash.digest('hex').slice(0, 16));
  if (existsSync(dir)) {
    const now = new Date();
    utimesSync(dir, now, now);
  } else {
    build(dir, sources, options);
  }
  pruneUnusedBuilds(dir);
  return dir;
}

/** The files under `dir` that a worker may load, relative to the repository. */
function filesUnder(dir: string): string[] {
  return readdirSync(path.join(repoRoot, dir), {
    recursive: true,
    withFileTypes: true,
  })
    .filter(
      (entry) =>
        entry.isFile() &&
        !entry.name.endsWith('.d.ts') &&
        !entry.name.endsWith('.spec.ts'),
    )
    .map((entry) =>
      path.relative(repoRoot, path.join(entry.parentPath, entry.name)),
    )
    .toSorted();
}

function build(
  dir: string,
  sources: ReadonlyMap<string, Buffer>,
  options: Options,
): void {
  // Built aside and renamed into place: a concurrent run never sees half a build.
  const staging = `${dir}.${process.pid}`;
  rmSync(staging, { recursive: true, force: true });
  for (const [file, content] of sources) {
    const target = path.join(staging, file);
    mkdirSync(path.dirname(target), { recursive: true });
    if (file.endsWith('.ts')) {
      const { code } = transformSync(content.toString('utf8'), {
        ...options,
        filename: path.join(repoRoot, file),
      });
      writeFileSync(target.replace(/\.ts$/, '.js'), code);
    } else {
      // The Lua scripts, read next to their module.
      writeFileSync(target, content);
    }
  }
  // contenders/versions.ts reads package versions from node_modules beside bench/.
  symlinkSync(
    path.join(repoRoot, 'node_modules'),
    path.join(staging, 'node_modules'),
    'dir',
  );
  try {
    renameSync(staging, dir);
  } catch (error) {
    // A concurrent run built the same sources first.
    if (!existsSync(dir)) throw error;
    rmSync(staging, { recursive: true, force: true });
  }
}

/** Removes the builds of other sources that no run used for a day. */
function pruneUnusedBuilds(current: string): void {
  for (const name of readdirSync(buildsDir)) {
    const dir = path.join(buildsDir, name);
    const usedAt = statSync(dir, { throwIfNoEntry: false })?.mtimeMs;
    if (dir !== current && usedAt && usedAt < Date.now() - keepUnusedBuildMs)
      rmSync(dir, { recursive: true, force: true });
  }
}
