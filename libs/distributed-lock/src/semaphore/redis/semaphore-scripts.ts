import type { Cluster, Redis } from 'ioredis';
import {
  defineScripts,
  readScriptWithIncludes,
  type ScriptCommand,
} from '../../backends/lua-scripts.js';

const withIncludes = (name: string): string =>
  readScriptWithIncludes(import.meta.url, name);

/**
 * One script per verb, each over the semaphore's six keys (see common.lua);
 * acquire also takes the fencing-token counter ({@link fenceCounterKey}).
 */
const scripts = {
  semaphoreAcquire: { numberOfKeys: 7, lua: withIncludes('acquire') },
  semaphoreExtend: { numberOfKeys: 6, lua: withIncludes('extend') },
  semaphoreRelease: { numberOfKeys: 6, lua: withIncludes('release') },
} as const;

export type SemaphoreScripts = Record<keyof typeof scripts, ScriptCommand>;

/** Typed callers of the scripts on `client`. */
export function defineSemaphoreScripts(
  client: Redis | Cluster,
): SemaphoreScripts {
  return defineScripts(client, scripts);
}

/**
 * The six keys of semaphore `key` (which ends in its `{name}` hash tag, so
 * all share one Cluster slot), in the order the scripts take them.
 */
export function semaphoreKeys(key: string): string[] {
  return [
    `${key}:holders`,
    `${key}:permits`,
    `${key}:queue`,
    `${key}:queue-alive`,
    `${key}:meta`,
    `${key}:wants`,
  ];
}

/**
 * The fencing-token counter of semaphore `key` (same hash tag). Unlike the
 * six keys above it never expires, so tokens keep rising across idle spells.
 */
export const fenceCounterKey = (key: string): string => `${key}:fence`;

/** The pub/sub channel on which semaphore `key`'s queue head is woken. */
export const wakeChannel = (key: string): string => `${key}:wake`;
