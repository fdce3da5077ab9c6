/**
 * A separate OS process that holds one lock (or `count` of them), for fault
 * tests; driven by test/support/lock-holder.ts (see LockHolderOptions there).
 *
 * It connects, acquires the key, optionally takes a fencing token and reports
 * to a served FencedResource, holds the lock for `holdMs` (or until SIGTERM),
 * then releases it and exits 0. Every step is one JSON line on stdout:
 *
 * - `ready`: connected to Redis
 * - `acquiring` `{ key, count, at }`: the acquisition was sent
 * - `acquired` `{ token, count, fence?, at }`: `at` is when the (last) grant
 *   arrived; `token` is the first lock's
 * - `not-acquired` `{ waitedMs, aborted, at }`: busy after `waitTime`, or
 *   SIGTERM came while waiting (`aborted`)
 * - `entered` `{ writer, overlap, at }`, `wrote` `{ writer, fence, accepted,
 *   held, sentAt, at }`: calls to the resource (`wrote` again every
 *   `writeEveryMs`); `held` is whether the hold was not known lost when the
 *   write was sent: a write goes out either way, as a stale holder's would
 * - `expiry` `{ expiresAt, at }` (with `reportExpiry`): the hold's local
 *   deadline moved; not reported once lost
 * - `lost` `{ key, reason, fence?, at }`: the library's `lost` event
 * - `released` `{ result, at }`: `result` is false when a lock had been lost
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
import { stayWhileParentLives } from './child-life.js';

const options = JSON.parse(process.argv[2] ?? '{}') as LockHolderOptions;
const writer = options.name ?? `holder-${process.pid}`;
const keys =
  options.count === undefined
    ? [options.key]
    : Array.from({ length: options.count }, (_, i) => `${options.key}:${i}`);
const CLOSE_PATIENCE_MS = 3_000;
const ACQUIRE_BATCH = 500;
const EXPIRY_POLL_MS = 5;

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
const keepAlive = stayWhileParentLives();

const { locks, client, close } = createLockService(options.url, {
  watchdogLeaseTime: options.watchdogLeaseTime,
  sessionTtl: options.sessionTtl,
  freeOnDisconnect: options.freeOnDisconnect,
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

async function write(handle: LockHandle, fence: number): Promise<void> {
  const held = !handle.lost;
  const sentAt = Date.now();
  try {
    const accepted = await resource!.write(fence, writer);
    emit('wrote', { writer, fence, accepted, held, sentAt, at: Date.now() });
  } catch (error) {
    emitError(error);
  }
}

/** Emits `expiry` whenever the earliest local deadline of `handles` moves; returns a stop function. */
function reportExpiry(handles: readonly LockHandle[]): () => void {
  let reported = 0;
  const timer = setInterval(() => {
    let expiresAt = Infinity;
    for (const handle of handles) {
      if (handle.lost) return;
      expiresAt = Math.min(expiresAt, handle.expiresAt);
    }
    // Date.now() and the monotonic clock tick apart: sub-ms jitter is no move.
    if (Math.abs(expiresAt - reported) < 2) return;
    reported = expiresAt;
    emit('expiry', { expiresAt, at: Date.now() });
  }, EXPIRY_POLL_MS);
  return () => clearInterval(timer);
}

/** Holds `handles` for `holdMs` (or until SIGTERM), using the resource meanwhile (one lock only). */
async function hold(
  handles: readonly LockHandle[],
  acquiredAt: number,
): Promise<void> {
  const handle = handles[0];
  let fence: number | undefined;
  if (options.fence && !stop.signal.aborted) {
    try {
      fence = await handle.fence();
    } catch (error) {
      emitError(error);
    }
  }
  emit('acquired', {
    token: handle.token,
    count: handles.length,
    fence,
    at: acquiredAt,
  });
  const stopReporting = options.reportExpiry
    ? reportExpiry(handles)
    : () => undefined;
  let entered = false;
  let writes: NodeJS.Timeout | undefined;
  if (resource && !stop.signal.aborted) {
    try {
      const overlap = await resource.enter(writer, fence);
      entered = true;
      emit('entered', { writer, overlap, at: Date.now() });
      if (fence !== undefined) {
        await write(handle, fence);
        const every = options.writeEveryMs;
        if (every !== undefined) {
          writes = setInterval(() => void write(handle, fence), every);
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
  stopReporting();
  if (entered) await resource!.leave(writer).catch(emitError);
}

async function main(): Promise<number> {
  try {
    await client.ping();
  } catch (error) {
    emitError(error);
    return 1;
  }
  if (keys.length > 1 && (options.fence || resource)) {
    emitError(new Error('count goes without fence and resourceUrl'));
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

/** Every key, `ACQUIRE_BATCH` at a time; on a failure, gives back those taken and throws. */
async function acquireAll(): Promise<LockHandle[]> {
  const handles: LockHandle[] = [];
  for (let from = 0; from < keys.length; from += ACQUIRE_BATCH) {
    const batch = await Promise.allSettled(
      keys.slice(from, from + ACQUIRE_BATCH).map((key) =>
        locks.acquire(key, {
          leaseTime: options.leaseTime,
          waitTime: options.waitTime,
          signal: stop.signal,
        }),
      ),
    );
    for (const result of batch)
      if (result.status === 'fulfilled') handles.push(result.value);
    const failed = batch.find((result) => result.status === 'rejected');
    if (failed) {
      await Promise.allSettled(handles.map((handle) => handle.release()));
      throw failed.reason;
    }
  }
  return handles;
}

/** One acquisition, hold and release; the exit code it calls for. */
async function holdOnce(): Promise<number> {
  let handles: LockHandle[];
  emit('acquiring', { key: options.key, count: keys.length, at: Date.now() });
  try {
    handles = await acquireAll();
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
  await hold(handles, Date.now());
  try {
    const results = await Promise.all(handles.map((h) => h.release()));
    emit('released', { result: results.every(Boolean), at: Date.now() });
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
