import { readFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { Command, type Cluster, type Redis } from 'ioredis';

/** A script and how many of its arguments are keys. */
export interface ScriptDefinition {
  /** Undefined: the caller passes the count first, then the keys and arguments. */
  readonly numberOfKeys?: number;
  readonly lua: string;
}

/** A script's caller: its keys, then its arguments. */
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
 * Callers of every script of `table` on `client`: each is sent in full
 * (EVAL) on its first call and by its SHA (EVALSHA) after that, and in full
 * once more whenever a server answers NOSCRIPT (restarted, failed over, a
 * Cluster node not sent it yet, or `SCRIPT FLUSH`). Nothing is added to the
 * client itself.
 */
export function defineScripts<Name extends string>(
  client: Redis | Cluster,
  table: Readonly<Record<Name, ScriptDefinition>>,
): Record<Name, ScriptCommand> {
  const commands = {} as Record<Name, ScriptCommand>;
  for (const name of Object.keys(table) as Name[])
    commands[name] = scriptCommand(client, table[name]);
  return commands;
}

const utf8 = 'utf8' as const;

/**
 * One script's caller (see {@link defineScripts}). Built on ioredis's
 * `Command` rather than `defineCommand`, whose callers cost 1 to 3 µs more
 * CPU per call on the benchmark's machine: a `Command` subclass with a
 * closure made on every write, and a second promise to catch NOSCRIPT on.
 * Here the NOSCRIPT check sits in the command's own rejection (see
 * {@link inFullOnNoScript}), so a call makes one promise, and the retry's
 * only when Redis lost the script. A call builds one array of its own, which
 * `Command` copies, and shares its options with the other calls while the
 * client's `keyPrefix` stays.
 */
function scriptCommand(
  client: Redis | Cluster,
  { lua, numberOfKeys }: ScriptDefinition,
): ScriptCommand {
  const sha = createHash('sha1').update(lua).digest('hex');
  // Read on each call, as ioredis does for its own commands; `Command` keeps
  // nothing of the object, so one serves every call.
  let options = { keyPrefix: client.options.keyPrefix, replyEncoding: utf8 };
  const currentOptions = () =>
    options.keyPrefix === client.options.keyPrefix
      ? options
      : (options = {
          keyPrefix: client.options.keyPrefix,
          replyEncoding: utf8,
        });
  // The first call sends the text, which caches the script on its server;
  // later ones only its SHA, and a server that lost it answers NOSCRIPT.
  let sent = false;
  return (...keysAndArgs) => {
    const args: (string | number)[] =
      numberOfKeys === undefined
        ? [sent ? sha : lua, ...keysAndArgs]
        : [sent ? sha : lua, numberOfKeys, ...keysAndArgs];
    if (!sent) {
      sent = true;
      return client.sendCommand(
        new Command('eval', args, currentOptions()),
      ) as Promise<unknown>;
    }
    return client.sendCommand(
      inFullOnNoScript(
        client,
        new Command('evalsha', args, currentOptions()),
        lua,
      ),
    ) as Promise<unknown>;
  };
}

/**
 * Makes `evalsha` send its script's text (`lua`) when Redis answers NOSCRIPT;
 * the retry settles `evalsha`, whose promise the caller holds. The retry's
 * arguments are taken from `evalsha` itself (its keys carry the client's
 * prefix already), not from the caller's array. A handler that kept that
 * array alive while the command was in flight made much of each call's
 * garbage outlive V8's young-generation GC under load (B's 64 loops,
 * bench/probes/promoted-bytes.ts: 850 bytes of each fenced cycle, 40
 * without), all of it copied to the old generation.
 */
function inFullOnNoScript(
  client: Redis | Cluster,
  evalsha: Command,
  lua: string,
): Command {
  const reject = evalsha.reject;
  evalsha.reject = (error: Error) => {
    if (!error.message.startsWith('NOSCRIPT')) return reject(error);
    const full = new Command('eval', [lua, ...evalsha.args.slice(1)], {
      replyEncoding: utf8,
    });
    full.promise.then(evalsha.resolve, reject);
    void client.sendCommand(full);
  };
  return evalsha;
}
