/**
 * Lock services for fault tests, and matchers that pick one lock command out
 * of a client's traffic (for the proxy's cutAfterRequest).
 */
import { createHash } from 'node:crypto';
import { Redis, type RedisOptions } from 'ioredis';
// Straight from the source files, not the package index: the index pulls in
// the Nest module, decorator and interceptor, which costs child processes
// (workers/) about half a second of start-up each.
import { lockScriptTexts } from '../../libs/distributed-lock/src/backends/redis/lock-scripts.js';
import { RedisLockBackend } from '../../libs/distributed-lock/src/backends/redis/redis-lock-backend.js';
import { coalesceWrites } from '../../libs/distributed-lock/src/backends/redis/write-coalescing.js';
import { LockService } from '../../libs/distributed-lock/src/lock-service/lock.service.js';
import type { LockLostEvent } from '../../libs/distributed-lock/src/lock-service/lock-events.js';

/** Settings of {@link openLocks}; unset ones take the library's defaults. */
export interface OpenLocksOptions {
  readonly client?: RedisOptions;
  readonly commandTimeoutMs?: number;
  readonly handoffLeaseMs?: number;
  readonly localHandoffs?: number;
  readonly localHandoffWindowMs?: number;
  readonly watchdogLeaseTime?: number;
  /** TTL of the process session in ms; unset: no session (holds renew their own lease). */
  readonly sessionTtl?: number;
  /** The backend's `freeOnDisconnect`. Default false. */
  readonly freeOnDisconnect?: boolean;
  readonly leaseTime?: number;
  readonly waitTime?: number;
  /** Default `'lock:'`. */
  readonly keyPrefix?: string;
  readonly maxKeyLength?: number;
  /** Coalesce the connection's writes, as the module does by default. Default true. */
  readonly coalesceWrites?: boolean;
}

/** A LockService with its backend and its own connection. */
export interface OpenedLocks {
  readonly locks: LockService;
  readonly backend: RedisLockBackend;
  readonly client: Redis;
  /** Closes the service, its backend and its connection. */
  readonly close: () => Promise<void>;
}

/** A LockService on its own connection to `url` (and so its own wake list). */
export function openLocks(
  url: string,
  options: OpenLocksOptions = {},
): OpenedLocks {
  const client = new Redis(url, {
    maxRetriesPerRequest: 1,
    ...options.client,
  });
  client.on('error', () => undefined);
  if (options.coalesceWrites ?? true) coalesceWrites(client);
  const backend = new RedisLockBackend({
    client,
    ownsClient: true,
    commandTimeoutMs: options.commandTimeoutMs,
    handoffLeaseMs: options.handoffLeaseMs,
    localHandoffs: options.localHandoffs,
    localHandoffWindowMs: options.localHandoffWindowMs,
    freeOnDisconnect: options.freeOnDisconnect,
  });
  const locks = new LockService({
    backend,
    keyPrefix: options.keyPrefix ?? 'lock:',
    leaseTime: options.leaseTime,
    watchdogLeaseTime: options.watchdogLeaseTime ?? 30_000,
    sessionTtl: options.sessionTtl,
    waitTime: options.waitTime ?? 5_000,
    maxKeyLength: options.maxKeyLength ?? 512,
  });
  return { locks, backend, client, close: () => locks.close() };
}

/** How many acquisitions wait in `backend`. */
export function waitingIn(backend: RedisLockBackend): number {
  return backend.bookkeeping().waiters ?? 0;
}

/** Matches a command `command` (e.g. `set`) on `key` in a client's traffic. */
export function commandOn(
  command: string,
  key: string,
): (chunk: Buffer) => boolean {
  const name = `\r\n${command.toLowerCase()}\r\n`;
  return (chunk) => {
    const text = chunk.toString('latin1');
    return text.toLowerCase().includes(name) && text.includes(key);
  };
}

/**
 * Matches a run of the lock script `script` (e.g. `lockRelease`) on `key`:
 * an EVALSHA, or the EVAL with the script's text that a client sends the
 * first time it runs it.
 */
export function scriptCall(
  script: string,
  key: string,
): (chunk: Buffer) => boolean {
  const lua = (lockScriptTexts as Record<string, string | undefined>)[script];
  if (lua === undefined) throw new Error(`no lock script named ${script}`);
  const found = { lua, sha: createHash('sha1').update(lua).digest('hex') };
  return (chunk) => {
    const text = chunk.toString('latin1');
    return (
      (text.includes(found.sha) || text.includes(found.lua)) &&
      text.includes(key)
    );
  };
}

/** The `lost` events of `s` from now on, each with when it came (ms since epoch). */
export function recordLost(
  s: OpenedLocks,
): Array<LockLostEvent & { readonly at: number }> {
  const lost: Array<LockLostEvent & { at: number }> = [];
  s.locks.events.on('lost', (event) => lost.push({ ...event, at: Date.now() }));
  return lost;
}
