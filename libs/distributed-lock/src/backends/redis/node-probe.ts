import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';
import { monotonicNow } from '../../lease/lease-clock.js';
import { answerDeadline } from '../answer-deadline.js';
import type { LockNodeHealth } from '../backend-health.js';

/** Lua scripts a probe looks for, with the SHA1 digests Redis caches them under. */
export class ProbedScripts {
  readonly digests: readonly string[];

  constructor(readonly sources: readonly string[]) {
    this.digests = sources.map((lua) =>
      createHash('sha1').update(lua).digest('hex'),
    );
  }
}

/**
 * States in which ioredis would only queue a command until it reconnects:
 * the node is reported down at once rather than at the time limit, and no
 * probe piles up in the offline queue of a server that is away.
 */
const disconnected = new Set<Redis['status']>(['close', 'reconnecting', 'end']);

/**
 * Probes one Redis server within `timeoutMs`: `PING` for reachability and
 * round trip, and at the same time `SCRIPT EXISTS` for `scripts`, then
 * `SCRIPT LOAD` for those missing, so that the lock calls that follow run
 * with `EVALSHA` at once. Never rejects.
 */
export async function probeRedisNode(
  client: Redis,
  scripts: ProbedScripts,
  timeoutMs: number,
): Promise<LockNodeHealth> {
  const address = addressOf(client);
  if (disconnected.has(client.status))
    return { address, up: false, message: `not connected (${client.status})` };
  const limit = new TimeLimit(timeoutMs);
  try {
    const sentAt = monotonicNow();
    const pong = client.ping();
    const cached = client.script('EXISTS', ...scripts.digests);
    // Read only once PING answered: it must not go unhandled before.
    cached.catch(() => undefined);
    await limit.race(pong);
    const latencyMs = Math.round((monotonicNow() - sentAt) * 10) / 10;
    return {
      address,
      up: true,
      latencyMs,
      ...(await cacheScripts(client, scripts, cached, limit)),
    };
  } catch (error) {
    return { address, up: false, message: describe(error, client) };
  } finally {
    limit.clear();
  }
}

type ScriptState = Pick<
  LockNodeHealth,
  'scriptsLoaded' | 'scriptsMissing' | 'message'
>;

async function cacheScripts(
  client: Redis,
  scripts: ProbedScripts,
  cached: Promise<unknown>,
  limit: TimeLimit,
): Promise<ScriptState> {
  let reply: unknown;
  try {
    reply = await limit.race(cached);
  } catch (error) {
    return { message: `scripts not checked: ${describe(error, client)}` };
  }
  const flags = Array.isArray(reply) ? reply : [];
  const missing = scripts.sources.filter(
    (_, index) => !(flags[index] === 1 || flags[index] === true),
  );
  if (missing.length === 0) return { scriptsLoaded: true, scriptsMissing: 0 };
  try {
    await limit.race(
      Promise.all(missing.map((lua) => client.script('LOAD', lua))),
    );
    return { scriptsLoaded: true, scriptsMissing: missing.length };
  } catch (error) {
    return {
      scriptsLoaded: false,
      scriptsMissing: missing.length,
      message: `scripts not loaded: ${describe(error, client)}`,
    };
  }
}

/** One time limit for every step of a probe (see {@link answerDeadline}). */
class TimeLimit {
  readonly clear: () => void;
  private readonly expired: Promise<never>;

  constructor(readonly ms: number) {
    let expire!: (error: Error) => void;
    this.expired = new Promise<never>((_, reject) => (expire = reject));
    this.expired.catch(() => undefined);
    // A command still pending holds its connection open, which keeps the
    // process alive as long as needed.
    this.clear = answerDeadline(
      ms,
      () => expire(new Error(`no answer within ${ms} ms`)),
      { unref: true },
    );
  }

  race<T>(pending: Promise<T>): Promise<T> {
    return Promise.race([pending, this.expired]);
  }
}

/** Where `client` connects: `host:port`, a socket path, or a Sentinel master. */
function addressOf(client: Redis): string {
  const { host, port, path, sentinels, name } = client.options;
  if (sentinels?.length) {
    const remote = client.stream?.remoteAddress;
    const at = remote ? ` at ${remote}:${client.stream.remotePort}` : '';
    return `sentinel master ${name ?? ''}${at}`;
  }
  if (path) return path;
  return `${host ?? '127.0.0.1'}:${port ?? 6379}`;
}

/** How ioredis rejects a command that outlived the client's `commandTimeout`. */
const clientTimedOut = 'Command timed out';

/**
 * The client's own time limit is worded like the probe's: when both are the
 * same (an app's health limit is often its client's `commandTimeout`), the
 * client's timer fires first, and the report should not depend on which.
 */
function describe(error: unknown, client: Redis): string {
  if (!(error instanceof Error)) return String(error);
  const { commandTimeout } = client.options;
  if (error.message === clientTimedOut && commandTimeout)
    return `no answer within ${commandTimeout} ms`;
  return error.message;
}
