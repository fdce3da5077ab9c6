import type { Cluster, Redis } from 'ioredis';
import {
  defineScripts,
  readScriptWithIncludes,
  type ScriptCommand,
} from '../lua-scripts.js';

/**
 * A script with the shared parts it names spliced in (next-fence, the
 * fencing-token rule; grant-next, the hand-off to the queue's next waiter).
 */
const withIncludes = (name: string): string =>
  readScriptWithIncludes(import.meta.url, name);

/**
 * Every script, read once when this module loads. The text is fixed from then
 * on, so each runs by EVALSHA, and by EVAL after a NOSCRIPT (for example
 * after Redis restarted and lost its script cache).
 */
const scripts = {
  lockAcquire: { numberOfKeys: 3, lua: withIncludes('acquire') },
  lockAcquireFenced: { numberOfKeys: 2, lua: withIncludes('acquire-fenced') },
  lockRelease: { numberOfKeys: 4, lua: withIncludes('release') },
  lockReleaseUnqueued: {
    numberOfKeys: 2,
    lua: withIncludes('release-unqueued'),
  },
  lockKick: { numberOfKeys: 3, lua: withIncludes('kick') },
  lockCancel: { numberOfKeys: 4, lua: withIncludes('cancel') },
  lockExtend: { numberOfKeys: 1, lua: withIncludes('extend') },
  lockPassOn: { numberOfKeys: 4, lua: withIncludes('pass-on') },
  lockFence: { numberOfKeys: 2, lua: withIncludes('fence') },
} as const;

type ScriptName = keyof typeof scripts;

/** Each lock script's text by its name (`lockRelease`, ...), for tests that spot its calls. */
export const lockScriptTexts: Readonly<Record<ScriptName, string>> =
  Object.fromEntries(
    Object.entries(scripts).map(([name, script]) => [name, script.lua]),
  ) as Record<ScriptName, string>;

/** The text of every lock script, as Redis caches it (for health probes). */
export const lockScriptSources: readonly string[] = Object.values(scripts).map(
  (script) => script.lua,
);

/** Callers of this backend's scripts on its ioredis client. */
export type LockScriptCommands = Record<ScriptName, ScriptCommand>;

/** Typed callers of the scripts on `client`. */
export function defineLockScripts(client: Redis | Cluster): LockScriptCommands {
  return defineScripts(client, scripts);
}
