import { readFileSync } from 'node:fs';
import type { Cluster, Redis } from 'ioredis';

/** A script as ioredis `defineCommand` takes it. */
export interface ScriptDefinition {
  readonly numberOfKeys: number;
  readonly lua: string;
}

/** A defined script: its keys, then its arguments. */
export type ScriptCommand = (
  ...keysAndArgs: (string | number)[]
) => Promise<unknown>;

/** Reads `<name>.lua` from the `scripts/` folder beside the module at `moduleUrl`. */
export function readScript(moduleUrl: string, name: string): string {
  return readFileSync(new URL(`./scripts/${name}.lua`, moduleUrl), 'utf8');
}

const includeLine = /^-- #include ([a-z-]+)\n/gm;

/**
 * {@link readScript}, with the shared parts it names spliced in: each
 * `-- #include <name>` line becomes scripts/<name>.lua next to it.
 */
export function readScriptWithIncludes(
  moduleUrl: string,
  name: string,
): string {
  return readScript(moduleUrl, name).replace(
    includeLine,
    (_line, part: string) => readScript(moduleUrl, part),
  );
}

/**
 * Registers every script of `table` on `client` as `<prefix><Name>` (once
 * per client: a second backend on the same client reuses them) and returns
 * them bound to it. The text is fixed once loaded, so ioredis runs each with
 * EVALSHA and falls back to EVAL after a NOSCRIPT (Redis restarted and lost
 * its script cache).
 */
export function defineScripts<Name extends string>(
  client: Redis | Cluster,
  prefix: string,
  table: Readonly<Record<Name, ScriptDefinition>>,
): Record<Name, ScriptCommand> {
  const target = client as unknown as Record<string, unknown>;
  const commands = {} as Record<Name, ScriptCommand>;
  for (const name of Object.keys(table) as Name[]) {
    const commandName = `${prefix}${name[0].toUpperCase()}${name.slice(1)}`;
    if (typeof target[commandName] !== 'function')
      client.defineCommand(commandName, table[name]);
    commands[name] = (target[commandName] as ScriptCommand).bind(client);
  }
  return commands;
}
