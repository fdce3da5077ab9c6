#!/usr/bin/env bash
# Packs the library, installs the tarball into a fresh Nest app whose module and
# controller are the README's quick-start code blocks, type-checks it strictly
# (skipLibCheck off, so the published .d.ts files are checked too), and runs two
# concurrent requests against a private redis-server: both must succeed, one
# after the other (the second with a larger fencing token).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
repo=$PWD
work=$(mktemp -d)
redis_pid=""
cleanup() {
  [[ -n $redis_pid ]] && kill "$redis_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

npm run --silent build:lib >/dev/null
(cd libs/distributed-lock && npm pack --silent --pack-destination "$work" >/dev/null)
tarball=$(ls "$work"/nest-distributed-lock-*.tgz)

app=$work/app
mkdir -p "$app/src"
node - "$repo/README.md" "$app/src" <<'JS'
const fs = require('node:fs');
const [readme, dir] = process.argv.slice(2);
const blocks = [...fs.readFileSync(readme, 'utf8').matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]);
const find = (marker) => {
  const block = blocks.find((b) => b.startsWith(marker));
  if (!block) throw new Error(`README has no ts block starting with ${marker}`);
  return block;
};
fs.writeFileSync(`${dir}/app.module.ts`, find('// app.module.ts'));
fs.writeFileSync(`${dir}/coupon.controller.ts`, find('// coupon.controller.ts'));
JS
cat >"$app/src/main.ts" <<'TS'
import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import { AppModule } from './app.module.js';

const app = await NestFactory.create(AppModule, { logger: ['error', 'warn'] });
await app.listen(0, '127.0.0.1');
const url = await app.getUrl();
const responses = await Promise.all(
  [1, 2].map(() => fetch(`${url}/coupon/7/buy`, { method: 'POST', headers: { userid: 'u1' } })),
);
const bodies = await Promise.all(responses.map((r) => r.json() as Promise<{ fencingToken: number }>));
await app.close();
const statuses = responses.map((r) => r.status).join(',');
const [first, second] = bodies.map((b) => b.fencingToken).sort((a, b) => a - b);
console.log(`statuses ${statuses}, fencing tokens ${first} < ${second}`);
if (statuses !== '201,201' || !(first > 0 && second > first)) process.exit(1);
TS
cat >"$app/tsconfig.json" <<'JSON'
{
  "compilerOptions": {
    "module": "nodenext", "moduleResolution": "nodenext", "target": "ES2023",
    "strict": true, "skipLibCheck": false, "types": ["node"],
    "emitDecoratorMetadata": true, "experimentalDecorators": true,
    "outDir": "dist", "rootDir": "src"
  }
}
JSON
peer() { node -p "require('$repo/package.json').dependencies['$1'] ?? require('$repo/package.json').devDependencies['$1']"; }
cat >"$app/package.json" <<JSON
{
  "name": "fresh-nest-app", "private": true, "type": "module",
  "dependencies": {
    "@nestjs/common": "$(peer @nestjs/common)", "@nestjs/core": "$(peer @nestjs/core)",
    "@nestjs/platform-express": "$(peer @nestjs/platform-express)", "ioredis": "$(peer ioredis)",
    "reflect-metadata": "$(peer reflect-metadata)", "rxjs": "$(peer rxjs)",
    "nest-distributed-lock": "file:$tarball"
  },
  "devDependencies": { "typescript": "$(peer typescript)", "@types/node": "$(peer @types/node)" }
}
JSON
cd "$app"
npm install --silent --no-audit --no-fund >/dev/null 2>&1 || npm install --no-audit --no-fund
npx tsc -p .

port=$(node -e "const s=require('net').createServer().listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})")
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --loglevel warning >/dev/null &
redis_pid=$!
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
REDIS_URL="redis://127.0.0.1:$port" node dist/main.js
echo "package check: the README quick start works in a fresh Nest app"
