import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants as fsConstants, statSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { pingRedis } from './redis-client.js';

/**
 * The no-setup fallback: a `redis-server` child process on a fixed loopback
 * port, without persistence. Instances on the same machine find and share it
 * (separate Redis servers would mean separate locks and stock counters).
 *
 * The server lives as long as the process that started it: a tiny `sh`
 * wrapper kills it when its stdin (a pipe from this process) closes, which
 * also happens when this process is killed with SIGKILL.
 */
export interface LocalRedisServer {
  readonly url: string;
  /** Whether this process started the server (else another instance did). */
  readonly started: boolean;
  stop(): Promise<void>;
}

const HOST = '127.0.0.1';
const EXTRA_BIN_DIRS = [
  '/usr/bin',
  '/usr/local/bin',
  '/usr/sbin',
  '/opt/homebrew/bin',
];

// Runs redis-server with our pipe as the wrapper's stdin (kept on fd 3; an
// asynchronous command's own stdin would be /dev/null). A reader waits for
// EOF on it, which comes when we close it or die, and then stops the server.
// The wrapper exits with the server (removing its scratch directory), so a
// server that fails at once is seen at once.
const WRAPPER = [
  'bin="$1"; shift',
  'exec 3<&0',
  '"$bin" "$@" </dev/null 3<&- &',
  'child=$!',
  '(read -r _ignored <&3; kill "$child" 2>/dev/null) &',
  'reader=$!',
  'wait "$child"',
  'status=$?',
  'kill "$reader" 2>/dev/null',
  'rm -rf -- "$REDIS_WORK_DIR"',
  'exit "$status"',
].join('\n');

/** Absolute path of `redis-server`, or undefined when it is not installed. */
export function findRedisServerBinary(
  env: NodeJS.ProcessEnv = process.env,
): string | undefined {
  const dirs = (env.PATH ?? '')
    .split(path.delimiter)
    .filter(Boolean)
    .concat(EXTRA_BIN_DIRS);
  for (const dir of dirs) {
    const candidate = path.join(dir, 'redis-server');
    try {
      accessSync(candidate, fsConstants.X_OK);
      if (statSync(candidate).isFile()) return candidate;
    } catch {
      // not here
    }
  }
  return undefined;
}

/** Uses the local fallback server on `port`, starting it when nobody has. */
export async function startOrReuseLocalRedis(
  binary: string,
  port: number,
  timeoutMs = 5_000,
): Promise<LocalRedisServer> {
  const url = `redis://${HOST}:${port}`;
  if ((await pingRedis(url, 1_000)) === undefined) {
    return { url, started: false, stop: () => Promise.resolve() };
  }
  const dir = await mkdtemp(path.join(os.tmpdir(), 'flash-sale-redis-'));
  const child = spawn(
    '/bin/sh',
    [
      '-c',
      WRAPPER,
      'flash-sale-redis',
      binary,
      '--port',
      String(port),
      '--bind',
      HOST,
      '--save',
      '',
      '--appendonly',
      'no',
      '--dir',
      dir,
    ],
    {
      stdio: ['pipe', 'pipe', 'pipe'],
      env: { ...process.env, REDIS_WORK_DIR: dir },
    },
  );
  let output = '';
  const collect = (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-4_000);
  };
  child.stdout?.on('data', collect);
  child.stderr?.on('data', collect);
  child.stdin?.on('error', () => undefined);
  const exited = new Promise<void>((resolve) =>
    child.once('exit', () => resolve()),
  );
  child.once('error', () => undefined);

  const stop = async () => {
    child.stdin?.end();
    await Promise.race([exited, sleep(5_000)]);
    if (child.exitCode === null && child.signalCode === null)
      child.kill('SIGKILL');
    await rm(dir, { recursive: true, force: true });
  };

  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const error = await pingRedis(url, 500);
    if (error === undefined) break;
    if (hasExited(child) || Date.now() > deadline) {
      await stop();
      throw new Error(
        `Could not start ${binary} on port ${port}: ${error.message}` +
          (output.trim() ? `\n${output.trim()}` : ''),
      );
    }
    await sleep(50);
  }
  // The server must not keep this process alive on its own.
  child.unref();
  for (const stream of [child.stdin, child.stdout, child.stderr]) {
    (stream as { unref?: () => void } | null)?.unref?.();
  }
  return { url, started: true, stop };
}

function hasExited(child: ChildProcess): boolean {
  return child.exitCode !== null || child.signalCode !== null;
}
