/**
 * A separate OS process that holds one lock, for fault tests; driven by
 * test/support/lock-holder.ts (see LockHolderOptions there).
 *
 * It connects, acquires the key, optionally takes a fencing token and reports
 * to a served FencedResource, holds the lock for `holdMs` (or until SIGTERM),
 * then releases it and exits 0. Every step is one JSON line on stdout:
 *
 * - `ready`: connected to Redis
 * - `acquiring`: the acquisition was sent
 * - `acquired` `{ token, fence?, at }`: `at` is when the grant arrived
 * - `not-acquired` `{ waitedMs, aborted, at }`: busy after `waitTime`, or
 *   SIGTERM came while waiting (`aborted`)
 * - `entered` `{ writer, overlap, at }`, `wrote` `{ writer, fence, accepted, at }`:
 *   calls to the resource (`wrote` again every `writeEveryMs`)
 * - `lost` `{ key, reason, fence?, at }`: the library's `lost` event
 * - `released` `{ result, at }`: `result` is false when the lock had been lost
 * - `done` `{ at }`: every round is over (see `repeatForMs`)
 * - `error` `{ name, message, at }`: then exits 1, unless stopping already
 *
 * Nest's log lines go to stderr, so stdout holds nothing but events. The
 * process exits by itself when its parent disappears.
 *
 * Usage: node --import @swc-node/register/esm-register lock-holder.ts '<LockHolderOptions as JSON>'
 */
import { Logger, type LoggerService } from '@nestjs/common';
import type { LockHandle } from '@app/distributed-lock';

import { LockNotAcquiredError } from '../../../libs/distributed-lock/src/errors/lock-errors.js';

import { fencedResourceClient } from '../fenced-resource-client.js';
import { createLockService, sleep } from '../lock-fixtures.js';
import type { LockHolderOptions } from '../lock-holder.js';

const options = JSON.parse(process.argv[2] ?? '{}') as LockHolderOptions;
const writer = options.name ?? `holder-${process.pid}`;
const CLOSE_PATIENCE_MS = 3_000;

function emit(event: string, fields: Record<string, unknown> = {}): void {
  process.stdout.write(`${JSON.stringify({ event, ...fields })}\n`);
}

function emitError(error: unknown): void {
  const { name, message } =
    error instanceof Error ? error : new Error(String(error));
  emit('error', { name, message, at: Date.now() });
}

const stderrLogger: LoggerService = {
  log: (message: unknown) => logLine('LOG', message),
  error: (message: unknown) => logLine('ERROR', message),
  warn: (message: unknown) => logLine('WARN', message),
  debug: (message: unknown) => logLine('DEBUG', message),
  verbose: (message: unknown) => logLine('VERBOSE', message),
};
function logLine(level: string, message: unknown): void {
  process.stderr.write(`[${level}] ${String(message)}\n`);
}
Logger.overrideLogger(stderrLogger);

// SIGTERM: stop waiting or holding, release, close, exit 0.
const stop = new AbortController();
const stopRequested = new Promise<void>((resolve) =>
  stop.signal.addEventListener('abort', () => resolve(), { once: true }),
);
process.on('SIGTERM', () => stop.abort());

// The lock's own timers are unref'd: hold the process open until done.
const keepAlive = setInterval(() => undefined, 1 << 30);
// Exit when orphaned (the parent died without killing us).
const parentPid = process.ppid;
setInterval(() => {
  if (process.ppid !== parentPid) process.exit(3);
}, 500).unref();

const { locks, client, close } = createLockService(options.url, {
  watchdogLeaseTime: options.watchdogLeaseTime,
  waitTime: options.waitTime,
  handoffLeaseMs: options.handoffLeaseMs,
  commandTimeoutMs: options.commandTimeoutMs,
});
locks.events.on('lost', (lost) =>
  emit('lost', {
    key: lost.key,
    reason: lost.reason,
    fence: lost.fencingToken,
    at: Date.now(),
  }),
);
const resource =
  options.resourceUrl === undefined
    ? undefined
    : fencedResourceClient(options.resourceUrl);

async function write(fence: number): Promise<void> {
  try {
    const accepted = await resource!.write(fence, writer);
    emit('wrote', { writer, fence, accepted, at: Date.now() });
  } catch (error) {
    emitError(error);
  }
}

/** Holds `handle` for `holdMs` (or until SIGTERM), using the resource meanwhile. */
async function hold(handle: LockHandle, acquiredAt: number): Promise<void> {
  let fence: number | undefined;
  if (options.fence && !stop.signal.aborted) {
    try {
      fence = await handle.fence();
    } catch (error) {
      emitError(error);
    }
  }
  emit('acquired', { token: handle.token, fence, at: acquiredAt });
  let entered = false;
  let writes: NodeJS.Timeout | undefined;
  if (resource && !stop.signal.aborted) {
    try {
      const overlap = await resource.enter(writer, fence);
      entered = true;
      emit('entered', { writer, overlap, at: Date.now() });
      if (fence !== undefined) {
        await write(fence);
        const every = options.writeEveryMs;
        if (every !== undefined) {
          writes = setInterval(() => void write(fence), every);
        }
      }
    } catch (error) {
      emitError(error);
    }
  }
  const holdMs = options.holdMs ?? 'forever';
  await (holdMs === 'forever'
    ? stopRequested
    : Promise.race([sleep(holdMs), stopRequested]));
  clearInterval(writes);
  if (entered) await resource!.leave(writer).catch(emitError);
}

async function main(): Promise<number> {
  try {
    await client.ping();
  } catch (error) {
    emitError(error);
    return 1;
  }
  emit('ready', { pid: process.pid, at: Date.now() });
  // With `repeatForMs`, holds the lock again and again until that has passed.
  const repeatUntil = Date.now() + (options.repeatForMs ?? 0);
  let code = 0;
  do {
    if (stop.signal.aborted) return 0;
    code = await holdOnce();
  } while (code === 0 && Date.now() < repeatUntil);
  emit('done', { at: Date.now() });
  return code;
}

/** One acquisition, hold and release; the exit code it calls for. */
async function holdOnce(): Promise<number> {
  let handle: LockHandle;
  emit('acquiring', { key: options.key, at: Date.now() });
  try {
    handle = await locks.acquire(options.key, {
      leaseTime: options.leaseTime,
      waitTime: options.waitTime,
      signal: stop.signal,
    });
  } catch (error) {
    if (!(error instanceof LockNotAcquiredError)) {
      emitError(error);
      return stop.signal.aborted ? 0 : 1;
    }
    emit('not-acquired', {
      waitedMs: error.waitedMs,
      aborted: stop.signal.aborted,
      at: Date.now(),
    });
    return 0;
  }
  await hold(handle, Date.now());
  try {
    emit('released', { result: await handle.release(), at: Date.now() });
  } catch (error) {
    emitError(error);
    return stop.signal.aborted ? 0 : 1;
  }
  return 0;
}

const code = await main();
await Promise.race([close().catch(emitError), sleep(CLOSE_PATIENCE_MS)]);
clearInterval(keepAlive);
process.exit(code);
