import type { Redis } from 'ioredis';
import {
  defineScripts,
  readScript,
  type ScriptCommand,
} from '../lua-scripts.js';

const read = (name: string) => readScript(import.meta.url, name);
/** Scripts that look at a holder's session start with the function that reads it. */
const withHolderSession = (name: string) => read('holder-session') + read(name);

/** Every script, read once when this module loads. */
const scripts = {
  acquire: { numberOfKeys: 4, lua: withHolderSession('acquire') },
  acquireFree: { numberOfKeys: 2, lua: read('acquire-free') },
  release: { numberOfKeys: 4, lua: read('release') },
  releaseUnqueued: { numberOfKeys: 2, lua: read('release-unqueued') },
  extend: { numberOfKeys: 3, lua: read('extend') },
  fence: { numberOfKeys: 2, lua: read('fence') },
  raiseFence: { numberOfKeys: 1, lua: read('raise-fence') },
  isLocked: { numberOfKeys: 1, lua: withHolderSession('is-locked') },
  // Three keys per renewal: the key count goes with each call, first.
  extendMany: { lua: read('extend-many') },
} as const;

type ScriptName = keyof typeof scripts;

/** The text of every quorum script, as Redis caches it (for health probes). */
export const quorumScriptSources: readonly string[] = Object.values(
  scripts,
).map((script) => script.lua);

/** One lease renewal of extend-many.lua. */
export interface LeaseRenewal {
  readonly key: string;
  readonly token: string;
  /** Whole ms. */
  readonly leaseMs: number;
}

/**
 * Reply of acquire.lua: `[1]`; `[0, pttl]`, or `[0, ms, holder, gone]` for a
 * holder bound to a session; or `[2, ms until the head waiter lapses]`.
 */
export type AcquireReply = readonly [0 | 1 | 2, number?, string?, (0 | 1)?];

/** Reply of is-locked.lua: `[]` when free, else `[holder, 1 if its session is gone here]`. */
export type HolderReply = readonly [] | readonly [string, 0 | 1];

/** The lock's queue on one node (see acquire.lua). */
function waitersKey(key: string): string {
  return `${key}:qwaiters`;
}

/** The lock's keys on one node; they share the lock's Cluster slot (its braces). */
export function quorumKeys(key: string) {
  return {
    lock: key,
    waiters: waitersKey(key),
    seen: `${key}:qseen`,
    freed: `${key}:qfreed`,
    fence: `${key}:qfence`,
  };
}

/** The channel a node publishes on when `key` is freed (see release.lua). */
export function wakeChannel(client: Redis, key: string): string {
  // Keys carry the client's prefix inside the scripts; channels are not
  // prefixed by ioredis, so this adds it for the same separation.
  return `${client.options?.keyPrefix ?? ''}${key}:qwake`;
}

/** Typed callers of the scripts on one node. */
export class QuorumScripts {
  private readonly commands: Record<ScriptName, ScriptCommand>;
  /**
   * Where session keys start, as the scripts build them: ioredis prefixes
   * only the keys it is given, not those a script makes up.
   */
  private readonly sessionPrefix: string;

  /** Callers of the scripts on `client`. */
  constructor(
    private readonly client: Redis,
    keyPrefix: string,
  ) {
    this.commands = defineScripts(client, scripts);
    this.sessionPrefix = `${client.options?.keyPrefix ?? ''}${keyPrefix}`;
  }

  /** `lapsedHolders`: tokens whose session is gone on a majority; their lock is free. */
  acquire(
    key: string,
    token: string,
    leaseMs: number,
    arrival: number,
    waitMs: number,
    graceMs: number,
    lapsedHolders: readonly string[] = [],
  ): Promise<AcquireReply> {
    const k = quorumKeys(key);
    return this.commands.acquire(
      k.lock,
      k.waiters,
      k.seen,
      k.freed,
      token,
      leaseMs,
      arrival,
      waitMs,
      graceMs,
      this.sessionPrefix,
      ...lapsedHolders,
    ) as Promise<AcquireReply>;
  }

  /**
   * acquire-free.lua: 1 when the lock was free and nobody waited here, and
   * `token` took it; 0, with nothing changed, for anything else.
   */
  acquireFree(key: string, token: string, leaseMs: number): Promise<number> {
    return this.commands.acquireFree(
      key,
      waitersKey(key),
      token,
      leaseMs,
    ) as Promise<number>;
  }

  /**
   * release-unqueued.lua: {@link release} where nobody waits (1 or 0 as it
   * answers); -1, with nothing changed, when someone does.
   */
  releaseUnqueued(key: string, token: string): Promise<number> {
    return this.commands.releaseUnqueued(
      key,
      waitersKey(key),
      token,
    ) as Promise<number>;
  }

  /**
   * Deletes the lock if `token` holds it (1 when it did) and takes the token
   * out of the queue; or, given `requeue`, gives back a lost attempt's grant
   * and puts the waiter back in its place.
   */
  release(
    key: string,
    token: string,
    graceMs: number,
    requeue?: { readonly arrival: number; readonly waitMs: number },
  ): Promise<number> {
    const k = quorumKeys(key);
    return this.commands.release(
      k.lock,
      k.waiters,
      k.seen,
      k.freed,
      token,
      wakeChannel(this.client, key),
      requeue ? '0' : '1',
      graceMs,
      requeue?.arrival ?? 0,
      requeue?.waitMs ?? 0,
    ) as Promise<number>;
  }

  /** 1 when `token` holds the lock here and its lease was set. */
  extend(
    key: string,
    token: string,
    leaseMs: number,
    graceMs: number,
  ): Promise<number> {
    const k = quorumKeys(key);
    return this.commands.extend(
      k.lock,
      k.waiters,
      k.freed,
      token,
      leaseMs,
      graceMs,
    ) as Promise<number>;
  }

  /**
   * {@link extend} for each renewal in one call: per renewal, in order, 1
   * when its token holds the lock here and its lease was set, else 0.
   */
  async extendMany(
    renewals: readonly LeaseRenewal[],
    graceMs: number,
  ): Promise<number[]> {
    const keys: string[] = [];
    const args: (string | number)[] = [];
    for (const { key, token, leaseMs } of renewals) {
      const k = quorumKeys(key);
      keys.push(k.lock, k.waiters, k.freed);
      args.push(token, leaseMs);
    }
    const reply = await this.commands.extendMany(
      keys.length,
      ...keys,
      ...args,
      graceMs,
    );
    if (!Array.isArray(reply) || reply.length !== renewals.length)
      throw new Error(
        `extend-many answered ${Array.isArray(reply) ? reply.length : typeof reply} entries for ${renewals.length} renewals`,
      );
    return reply as number[];
  }

  /** This node's fencing candidate, or null when `token` does not hold the lock here. */
  fence(key: string, token: string): Promise<number | null> {
    const k = quorumKeys(key);
    return this.commands.fence(k.lock, k.fence, token) as Promise<
      number | null
    >;
  }

  /** Raises the fencing counter to at least `token`. */
  raiseFence(key: string, token: number): Promise<unknown> {
    return this.commands.raiseFence(quorumKeys(key).fence, String(token));
  }

  /** Who holds the lock here, and whether their session is gone here. */
  holder(key: string): Promise<HolderReply> {
    return this.commands.isLocked(
      key,
      this.sessionPrefix,
    ) as Promise<HolderReply>;
  }
}
