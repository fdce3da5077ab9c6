import { readFileSync } from 'node:fs';
import type { Cluster, Redis } from 'ioredis';

function readScript(name: string): string {
  return readFileSync(
    new URL(`./scripts/${name}.lua`, import.meta.url),
    'utf8',
  );
}

const grantNext = readScript('grant-next');
const includeLine = '-- #include grant-next\n';

/** A script that may free a lock, with the shared hand-off functions spliced in. */
function withGrantNext(name: string): string {
  const lua = readScript(name);
  if (!lua.includes(includeLine))
    throw new Error(`${name}.lua lacks its "${includeLine.trim()}" line`);
  return lua.replace(includeLine, () => grantNext);
}

/**
 * Every script, read once when this module loads. The text is fixed from then
 * on, so ioredis runs each with EVALSHA and falls back to EVAL after a
 * NOSCRIPT (for example after Redis restarted and lost its script cache).
 */
const scripts = {
  lockAcquire: { numberOfKeys: 3, lua: withGrantNext('acquire') },
  lockRelease: { numberOfKeys: 4, lua: withGrantNext('release') },
  lockReleaseUnqueued: { numberOfKeys: 2, lua: readScript('release-unqueued') },
  lockKick: { numberOfKeys: 3, lua: withGrantNext('kick') },
  lockCancel: { numberOfKeys: 4, lua: withGrantNext('cancel') },
  lockExtend: { numberOfKeys: 1, lua: readScript('extend') },
  lockPassOn: { numberOfKeys: 3, lua: readScript('pass-on') },
  lockFence: { numberOfKeys: 2, lua: withGrantNext('fence') },
} as const;

type ScriptName = keyof typeof scripts;

/** The script commands this backend adds to its ioredis client. */
export type LockScriptCommands = {
  [K in ScriptName]: (...keysAndArgs: (string | number)[]) => Promise<unknown>;
};

const prefix = 'distributedLock';

/** Registers the scripts on `client` (idempotent) and returns typed callers. */
export function defineLockScripts(client: Redis | Cluster): LockScriptCommands {
  const target = client as unknown as Record<string, unknown>;
  const commands = {} as Record<ScriptName, LockScriptCommands[ScriptName]>;
  for (const name of Object.keys(scripts) as ScriptName[]) {
    const commandName = `${prefix}${name[0].toUpperCase()}${name.slice(1)}`;
    if (typeof target[commandName] !== 'function') {
      client.defineCommand(commandName, scripts[name]);
    }
    const command = target[commandName] as LockScriptCommands[ScriptName];
    commands[name] = command.bind(client);
  }
  return commands as LockScriptCommands;
}
