#!/usr/bin/env bash
# Checks the library as npm users get it: builds and packs it, checks the
# tarball's contents (scripts/check-package-contents.mjs), then installs the
# tarball into two fresh apps outside the monorepo (mktemp -d, so nothing
# resolves from this repository's node_modules) and runs the package README's
# quick start in each against a private redis-server:
#
#   - an ESM app ("type": "module") on NestJS 12, TypeScript 6 (the versions
#     this repository uses);
#   - a CommonJS app ("type": "commonjs", compiled to require() calls) on
#     NestJS 11 and TypeScript 5.9 with Nest 11's "module": "nodenext". It loads
#     the ESM-only package through Node's require(esm) (Node ^20.19 / >=22.12).
#
# Each app's module, controller and service are the README's `// app.module.ts`,
# `// coupon.controller.ts` and `// coupon-stock.service.ts` code blocks, read
# from the README inside the tarball. Each app is type-checked strictly
# (skipLibCheck off, so the published .d.ts files are checked against that Nest
# version's types), then: two concurrent requests to the decorated route and a
# LockService call on the same key must all succeed, each with its own fencing
# token; a busy lock must answer 409 with LOCK_NOT_ACQUIRED and Retry-After.
# The ESM app also installs the optional peers prom-client and
# @nestjs/terminus and checks, from the installed package, a Prometheus scrape
# with `metrics: true` and a terminus health check
# (scripts/check-package-telemetry.sh).
# Finally every tested version of a peer (Nest, ioredis, ...; the optional
# peers as the ESM app and this repository's tests use them) must be in the
# package's peer ranges, and every major version those ranges admit must have
# been tested.
#
# Also first: the package README's tables must equal the repository README's
# (scripts/package-readme.mjs --check).
#
# Packages come from the npm registry (or the npm cache, --prefer-offline).
# NEST12_VERSION overrides the ESM app's Nest version; NEST11_VERSION and
# CJS_TYPESCRIPT_VERSION the CommonJS app's Nest and TypeScript versions.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
repo=$PWD
nest11=${NEST11_VERSION:-11.2.10}
nest12=${NEST12_VERSION:-}
cjs_typescript=${CJS_TYPESCRIPT_VERSION:-5.9.3}

work=$(mktemp -d)
redis_pid=""
cleanup() {
  if [[ -n $redis_pid ]]; then kill "$redis_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

started=$SECONDS
say() { echo "package check: $* ($((SECONDS - started)) s)"; }
# Runs a command with its output in $work/<log>; on failure prints the output.
quietly() {
  local log=$work/$1
  shift
  if ! "$@" >"$log" 2>&1; then
    cat "$log" >&2
    echo "package check: failed: $*" >&2
    return 1
  fi
}

# 1. The README tables, the build, the tarball.
node scripts/package-readme.mjs --check
quietly build.log npm run build:lib
if ! (cd libs/distributed-lock && npm pack --json --pack-destination "$work" 2>"$work/pack.log") >"$work/pack.json"; then
  cat "$work/pack.log" >&2
  echo "package check: npm pack failed" >&2
  exit 1
fi
tarball=$(ls "$work"/nest-distributed-lock-*.tgz)
node scripts/check-package-contents.mjs "$work/pack.json"
mkdir "$work/packed"
tar -xzf "$tarball" -C "$work/packed" package/README.md
say "packed $(basename "$tarball")"

# 2. The apps' sources: the README's code blocks and a check of their behaviour.
write_sources() {
  local dir=$1
  mkdir -p "$dir"
  node - "$work/packed/package/README.md" "$dir" <<'JS'
const fs = require('node:fs');
const [readme, dir] = process.argv.slice(2);
const blocks = [...fs.readFileSync(readme, 'utf8').matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]);
for (const file of ['app.module.ts', 'coupon.controller.ts', 'coupon-stock.service.ts']) {
  const block = blocks.find((b) => b.startsWith(`// ${file}\n`));
  if (!block) throw new Error(`the package README has no ts block starting with // ${file}`);
  fs.writeFileSync(`${dir}/${file}`, block);
}
JS
  # No top-level await: the same file compiles to ESM and to CommonJS.
  cat >"$dir/main.ts" <<'TS'
import 'reflect-metadata';
import { Controller, Module, Post } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { DistributedLock, LockService } from 'nest-distributed-lock';
import { AppModule } from './app.module.js';
import { CouponStockService } from './coupon-stock.service.js';

// Not in the README: a route that never waits, to see a busy lock's answer.
@Controller('busy')
class BusyController {
  @Post()
  @DistributedLock('busy', { waitTime: 0 })
  take() {
    return { taken: true };
  }
}

@Module({ imports: [AppModule], controllers: [BusyController] })
class CheckModule {}

const problems: string[] = [];
const expect = (ok: boolean, what: string) => {
  if (!ok) problems.push(what);
};

async function main(): Promise<void> {
  const app = await NestFactory.create(CheckModule, { logger: ['error', 'warn'] });
  await app.listen(0, '127.0.0.1');
  const url = await app.getUrl();
  const buy = () => fetch(`${url}/coupon/7/buy`, { method: 'POST', headers: { userid: 'u1' } });

  // The decorated route twice and LockService once, on the same key.
  const [first, second, restocked] = await Promise.all([
    buy(),
    buy(),
    app.get(CouponStockService).restock(7, 5),
  ]);
  const bodies = await Promise.all(
    [first, second].map((r) => r.json() as Promise<{ fencingToken?: number }>),
  );
  const tokens = [...bodies.map((b) => b.fencingToken), restocked.fencingToken];
  expect(
    first.status === 201 && second.status === 201,
    `the route answered ${first.status}, ${second.status}, expected 201, 201`,
  );
  expect(
    tokens.every((t) => Number.isSafeInteger(t) && t! > 0) && new Set(tokens).size === 3,
    `fencing tokens ${tokens.join(', ')}, expected three different positive integers`,
  );

  // A busy lock: 409 with the JSON body and Retry-After, from the interceptor.
  const held = await app.get(LockService).acquire('busy');
  const busy = await fetch(`${url}/busy`, { method: 'POST' });
  const busyBody = (await busy.json()) as { code?: string; key?: string };
  const retryAfter = busy.headers.get('retry-after');
  await held.release();
  expect(
    busy.status === 409 && busyBody.code === 'LOCK_NOT_ACQUIRED' && busyBody.key === 'busy' && retryAfter === '1',
    `a busy lock answered ${busy.status} ${JSON.stringify(busyBody)} with Retry-After ${retryAfter}, ` +
      'expected 409, LOCK_NOT_ACQUIRED, key busy, Retry-After 1',
  );
  const free = await fetch(`${url}/busy`, { method: 'POST' });
  expect(free.status === 201, `the released lock answered ${free.status}, expected 201`);

  await app.close();
  const sorted = (tokens as number[]).toSorted((a, b) => a - b);
  console.log(
    `routes ${first.status}, ${second.status} and LockService, fencing tokens ${sorted.join(' < ')}; ` +
      `busy lock ${busy.status} ${busyBody.code}, Retry-After ${retryAfter}`,
  );
  if (problems.length > 0) {
    for (const problem of problems) console.error(`problem: ${problem}`);
    process.exitCode = 1;
  }
}

setTimeout(() => {
  console.error('problem: the app did not finish within 30 s');
  process.exit(1);
}, 30_000).unref();
main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
TS
}

# package.json and tsconfig.json of an app. Versions not given (an empty Nest
# version too) come from this repository's package.json, and so in CI from the
# npm cache that `npm ci` filled.
repo_version() {
  node -p "const p = require('$repo/package.json'); p.dependencies['$1'] ?? p.devDependencies['$1']"
}
source "$repo/scripts/check-package-telemetry.sh"
write_app() {
  local dir=$1 type=$2 nest=$3 typescript=$4
  write_sources "$dir/src"
  cat >"$dir/package.json" <<JSON
{
  "name": "fresh-nest-app-$type",
  "private": true,
  "type": "$type",
  "dependencies": {
    "@nestjs/common": "${nest:-$(repo_version @nestjs/common)}",
    "@nestjs/core": "${nest:-$(repo_version @nestjs/core)}",
    "@nestjs/platform-express": "${nest:-$(repo_version @nestjs/platform-express)}",
    "ioredis": "$(repo_version ioredis)",
    "reflect-metadata": "$(repo_version reflect-metadata)",
    "rxjs": "$(repo_version rxjs)",
$(if [[ $type == module ]]; then telemetry_dependencies; fi)
    "nest-distributed-lock": "file:$tarball"
  },
  "devDependencies": {
    "typescript": "$typescript",
    "@types/node": "$(repo_version @types/node)"
  }
}
JSON
  # Nest 11's starter tsconfig, made strict, with the declarations checked.
  cat >"$dir/tsconfig.json" <<'JSON'
{
  "compilerOptions": {
    "module": "nodenext",
    "moduleResolution": "nodenext",
    "resolvePackageJsonExports": true,
    "esModuleInterop": true,
    "isolatedModules": true,
    "target": "ES2023",
    "strict": true,
    "skipLibCheck": false,
    "types": ["node"],
    "emitDecoratorMetadata": true,
    "experimentalDecorators": true,
    "outDir": "dist",
    "rootDir": "src"
  }
}
JSON
}

esm=$work/esm-nest12
cjs=$work/cjs-nest11
write_app "$esm" module "$nest12" "$(repo_version typescript)"
write_app "$cjs" commonjs "$nest11" "$cjs_typescript"
write_telemetry_check "$esm"

# 3. Install both (at once: they share the npm cache) and compile both.
install() { (cd "$1" && npm install --prefer-offline --no-audit --no-fund); }
compile() { (cd "$1" && ./node_modules/.bin/tsc -p .); }
# Runs `$2 <app dir>` for both apps at once, logging to <app>-$1.log; fails
# when either fails.
in_both_apps() {
  local ok=true esm_pid cjs_pid
  quietly "esm-$1.log" "$2" "$esm" &
  esm_pid=$!
  quietly "cjs-$1.log" "$2" "$cjs" &
  cjs_pid=$!
  wait "$esm_pid" || ok=false
  wait "$cjs_pid" || ok=false
  [[ $ok == true ]]
}
in_both_apps install install || exit 1
say "installed the tarball into both apps"
in_both_apps tsc compile || exit 1
if ! grep -q 'require("nest-distributed-lock")' "$cjs/dist/app.module.js"; then
  echo 'package check: the CommonJS app did not compile to require("nest-distributed-lock")' >&2
  exit 1
fi
say "both apps type-check against the published declarations"

# 4. Run both against a private redis-server (one database each).
port=$(node -e "const s=require('net').createServer().listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})")
"${REDIS_SERVER_BIN:-redis-server}" --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
  --loglevel warning >/dev/null &
redis_pid=$!
for _ in $(seq 50); do
  if node -e "require('net').connect($port,'127.0.0.1').on('connect',()=>process.exit(0)).on('error',()=>process.exit(1))"; then
    break
  fi
  sleep 0.1
done
installed() { node -p "require('$1/node_modules/$2/package.json').version"; }
db=0
for app in "$esm" "$cjs"; do
  label="$(basename "$app"): Nest $(installed "$app" @nestjs/core), TypeScript $(installed "$app" typescript)"
  if ! (cd "$app" && REDIS_URL="redis://127.0.0.1:$port/$db" node dist/main.js >run.log 2>&1); then
    cat "$app/run.log" >&2
    echo "package check: FAILED in the $label app" >&2
    exit 1
  fi
  echo "$label: $(cat "$app/run.log")"
  db=$((db + 1))
done
if ! (cd "$esm" && REDIS_URL="redis://127.0.0.1:$port/$db" node dist/telemetry.js >telemetry.log 2>&1); then
  cat "$esm/telemetry.log" >&2
  echo "package check: FAILED: metrics or the terminus health check in the ESM app" >&2
  exit 1
fi
echo "$(basename "$esm") with prom-client $(installed "$esm" prom-client), @nestjs/terminus $(installed "$esm" @nestjs/terminus): $(cat "$esm/telemetry.log")"

# 5. The peer ranges admit exactly the major versions tested.
tested=()
for name in @nestjs/common @nestjs/core ioredis reflect-metadata rxjs; do
  tested+=(--tested "$name=$(installed "$esm" "$name"),$(installed "$cjs" "$name")")
done
for name in prom-client @nestjs/terminus; do
  tested+=(--tested "$name=$(installed "$esm" "$name"),$(installed "$repo" "$name")")
done
# Tested by this repository's own tests only.
for name in @nestjs/schedule @opentelemetry/api; do
  tested+=(--tested "$name=$(installed "$repo" "$name")")
done
node scripts/check-package-contents.mjs "$work/pack.json" "${tested[@]}"
say "the package README's quick start works in a fresh ESM Nest 12 app and a CommonJS Nest 11 app, metrics and health checks in the ESM one"
