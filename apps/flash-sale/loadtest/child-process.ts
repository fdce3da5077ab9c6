import { spawn, type ChildProcess } from 'node:child_process';
import type { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';

/** The monorepo's root: child processes run there (swc-node finds tsconfig.json). */
export const repoRoot = fileURLToPath(new URL('../../../', import.meta.url));

/** Runs a TypeScript file of this repo through SWC (decorator metadata kept), or a built .js file as is. */
export function nodeArgs(file: string): string[] {
  return file.endsWith('.ts')
    ? ['--import', '@swc-node/register/esm-register', file]
    : [file];
}

export interface GuardedProcess {
  readonly child: ChildProcess;
  /** Resolves once the process has exited. */
  readonly exited: Promise<{ code: number | null; signal: string | null }>;
  /** Whether it has exited. */
  hasExited(): boolean;
  /** The last lines it wrote (stdout and stderr). */
  tail(): string;
  /** Sends `signal`, then SIGKILL after `graceMs`; resolves when it has exited. */
  stop(signal?: NodeJS.Signals, graceMs?: number): Promise<void>;
}

const TAIL_LINES = 60;

/**
 * Starts a Node process that dies with us: a detached `sh` watchdog reads a
 * pipe only this process holds, and SIGKILLs the child when that pipe closes
 * (also when we are killed with SIGKILL, when no exit handler runs).
 */
export function spawnGuarded(
  args: string[],
  env: NodeJS.ProcessEnv,
  onLine?: (line: string) => void,
): GuardedProcess {
  const child = spawn(process.execPath, args, {
    cwd: repoRoot,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: string[] = [];
  const keep = (line: string) => {
    lines.push(line);
    if (lines.length > TAIL_LINES) lines.shift();
    onLine?.(line);
  };
  const collect = (stream: Readable | null) => {
    let partial = '';
    stream?.on('data', (chunk: Buffer) => {
      const parts = (partial + chunk.toString('utf8')).split('\n');
      partial = parts.pop() ?? '';
      for (const line of parts) keep(line);
    });
    // A process that dies mid-line (an uncaught error's last words) still shows it.
    stream?.on('end', () => {
      if (partial !== '') keep(partial);
      partial = '';
    });
  };
  collect(child.stdout);
  collect(child.stderr);

  let exitInfo: { code: number | null; signal: string | null } | undefined;
  const exited = new Promise<{ code: number | null; signal: string | null }>(
    (resolve) => {
      child.once('exit', (code, signal) => {
        exitInfo = { code, signal };
      });
      // After 'exit' and once its output is read to the end: what it wrote
      // just before dying would otherwise be missing from the tail.
      child.once('close', (code, signal) => {
        exitInfo ??= { code, signal };
        resolve(exitInfo);
      });
      child.once('error', (error) => {
        if (child.pid === undefined) {
          lines.push(`could not start: ${error.message}`);
          exitInfo = { code: null, signal: null };
          resolve(exitInfo);
        }
      });
    },
  );
  const watchdog = child.pid === undefined ? undefined : guard(child.pid);
  void exited.then(() => watchdog?.kill('SIGKILL'));
  live.add(child);
  void exited.then(() => live.delete(child));
  installExitHook();

  return {
    child,
    exited,
    hasExited: () => exitInfo !== undefined,
    tail: () => lines.join('\n'),
    stop: async (signal = 'SIGTERM', graceMs = 10_000) => {
      if (exitInfo) return;
      child.kill(signal);
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<'late'>((resolve) => {
        timer = setTimeout(() => resolve('late'), graceMs);
      });
      if ((await Promise.race([exited, late])) === 'late') {
        child.kill('SIGKILL');
        await exited;
      }
      clearTimeout(timer);
    },
  };
}

function guard(pid: number): ChildProcess | undefined {
  try {
    const watchdog = spawn(
      '/bin/sh',
      [
        '-c',
        'read -r _ignored; kill -9 "$1" 2>/dev/null',
        'loadtest-guard',
        String(pid),
      ],
      { stdio: ['pipe', 'ignore', 'ignore'], detached: true },
    );
    watchdog.on('error', () => undefined);
    watchdog.stdin?.on('error', () => undefined);
    watchdog.unref();
    (watchdog.stdin as unknown as { unref?: () => void } | null)?.unref?.();
    return watchdog;
  } catch {
    return undefined; // best effort: no sh, no watchdog
  }
}

const live = new Set<ChildProcess>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => {
    for (const child of live) child.kill('SIGKILL');
  });
}
