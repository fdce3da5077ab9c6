import { spawn, type ChildProcess } from 'node:child_process';
import { rmSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import type net from 'node:net';

/**
 * The `redis-server` child processes behind the test servers: spawning them,
 * stopping them, and making sure none outlives the test process.
 */

const STOP_TIMEOUT_MS = 5_000;
const OUTPUT_TAIL_CHARS = 8_000;

export interface ExitInfo {
  code: number | null;
  signal: NodeJS.Signals | null;
  error?: Error;
}

export interface RunningProcess {
  child: ChildProcess;
  watchdog?: ChildProcess;
  dir: string;
  exit: Promise<ExitInfo>;
  exited?: ExitInfo;
  /** Stopped by {@link ManagedRedisServer.freeze} and not continued since. */
  frozen?: boolean;
  output: string;
}

/** Every server process that has been spawned and not yet reaped. */
const running = new Set<RunningProcess>();
let exitHookInstalled = false;

export function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  // 'exit' handlers must be synchronous: signal the children and delete the
  // directories right away, without waiting for anything.
  process.on('exit', () => {
    for (const proc of running) {
      proc.watchdog?.kill('SIGKILL');
      proc.child.kill('SIGKILL');
      try {
        rmSync(proc.dir, { recursive: true, force: true });
      } catch {
        // Best effort: never throw from an exit handler.
      }
    }
    running.clear();
  });
}

export function spawnServer(
  binary: string,
  args: string[],
  dir: string,
): RunningProcess {
  // stdout/stderr are piped to us (not inherited) so a leaked server can never
  // hold the test runner's output pipes open; we keep the tail for errors.
  const child = spawn(binary, args, {
    cwd: dir,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const proc: RunningProcess = {
    child,
    dir,
    output: '',
    exit: new Promise<ExitInfo>((resolve) => {
      child.once('exit', (code, signal) => resolve({ code, signal }));
      child.once('error', (error) => {
        // Only a failed spawn means there is no process; other 'error' events
        // (a failed kill) leave it running and 'exit' will still come.
        if (child.pid === undefined)
          resolve({ code: null, signal: null, error });
      });
    }),
  };
  void proc.exit.then((info) => {
    proc.exited = info;
  });
  const collect = (chunk: Buffer) => {
    proc.output = (proc.output + chunk.toString('utf8')).slice(
      -OUTPUT_TAIL_CHARS,
    );
  };
  child.stdout?.on('data', collect);
  child.stderr?.on('data', collect);

  // Neither the server nor its pipes keep the event loop alive: a script that
  // forgets stop() still exits, and the 'exit' handler kills the server.
  child.unref();
  (child.stdout as net.Socket | null)?.unref();
  (child.stderr as net.Socket | null)?.unref();

  if (child.pid !== undefined) {
    running.add(proc);
    proc.watchdog = startWatchdog(child.pid, dir);
  }
  return proc;
}

/**
 * A detached `sh` that blocks reading a pipe only we write to. When this
 * process dies in any way (even SIGKILL, when no 'exit' handler runs) the pipe
 * reaches EOF and the watchdog kills the server and removes its directory.
 * On a normal stop we SIGKILL the watchdog first, so it does nothing.
 */
function startWatchdog(pid: number, dir: string): ChildProcess | undefined {
  try {
    const watchdog = spawn(
      '/bin/sh',
      [
        '-c',
        'read -r _ignored; kill -9 "$1" 2>/dev/null; rm -rf -- "$2"',
        'redis-server-watchdog',
        String(pid),
        dir,
      ],
      { stdio: ['pipe', 'ignore', 'ignore'], detached: true },
    );
    watchdog.on('error', () => undefined); // best effort: no sh, no watchdog
    watchdog.stdin?.on('error', () => undefined);
    watchdog.unref();
    (watchdog.stdin as net.Socket | null)?.unref();
    return watchdog;
  } catch {
    return undefined;
  }
}

export async function terminateProcess(
  proc: RunningProcess,
  signal: 'SIGTERM' | 'SIGKILL',
): Promise<void> {
  // Keep the event loop alive while we wait for the exit.
  proc.child.ref();
  try {
    if (!proc.exited) {
      proc.child.kill(signal);
      // A stopped process only acts on SIGTERM once continued (SIGKILL needs
      // no help); the SIGTERM is pending, so it runs first.
      if (proc.frozen && signal !== 'SIGKILL') proc.child.kill('SIGCONT');
    }
    if (!(await waitForExit(proc, STOP_TIMEOUT_MS))) {
      proc.child.kill('SIGKILL');
      await proc.exit;
    }
  } finally {
    proc.child.unref();
    proc.watchdog?.kill('SIGKILL');
    running.delete(proc);
    await rm(proc.dir, { recursive: true, force: true });
  }
}

async function waitForExit(
  proc: RunningProcess,
  timeoutMs: number,
): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), timeoutMs);
  });
  try {
    return await Promise.race([proc.exit.then(() => true), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

export function describeExit({ code, signal, error }: ExitInfo): string {
  if (error) return `could not be spawned: ${error.message}`;
  return signal ? `killed by ${signal}` : `exit code ${code}`;
}

export function formatOutput(output: string): string {
  const trimmed = output.trim();
  return trimmed ? `. Its output:\n${trimmed}` : '';
}
