import type { Cluster, Redis } from 'ioredis';
import {
  defineScripts,
  readScript,
  type ScriptCommand,
} from '../lua-scripts.js';

const includeLine = /^-- #include ([a-z-]+)\n/gm;

/**
 * A script with the shared parts it names spliced in: each `-- #include
 * <name>` line becomes scripts/<name>.lua (next-fence, the fencing-token
 * rule; grant-next, the hand-off to the queue's next waiter).
 */
function withIncludes(name: string): string {
  return readScript(import.meta.url, name).replace(
    includeLine,
    (_line, part: string) => readScript(import.meta.url, part),
  );
}

/**
 * Every script, read once when this module loads. The text is fixed from then
 * on, so ioredis runs each with EVALSHA and falls back to EVAL after a
 * NOSCRIPT (for example after Redis restarted and lost its script cache).
 */
const scripts = {
  lockAcquire: { numberOfKeys: 3, lua: withIncludes('acquire') },
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

/** The script commands this backend adds to its ioredis client. */
export type LockScriptCommands = Record<ScriptName, ScriptCommand>;

/** Registers the scripts on `client` (idempotent) and returns typed callers. */
export function defineLockScripts(client: Redis | Cluster): LockScriptCommands {
  return defineScripts(client, 'distributedLock', scripts);
}
