import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const repoRoot = fileURLToPath(new URL('../../', import.meta.url));

/** Starts a TypeScript file of this repo as a separate Node process (SWC, with decorator metadata). */
export function spawnTs(
  file: string,
  args: string[],
  env: NodeJS.ProcessEnv = {},
): ChildProcess {
  return spawn(
    process.execPath,
    ['--import', '@swc-node/register/esm-register', file, ...args],
    {
      cwd: repoRoot,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
}

/** Runs a TS file to completion and returns its stdout; rejects on a non-zero exit. */
export function runTs(
  file: string,
  args: string[],
  timeoutMs = 60_000,
): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawnTs(file, args);
    let stdout = '';
    let stderr = '';
    child.stdout?.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(
        new Error(`${file} did not finish within ${timeoutMs} ms\n${stderr}`),
      );
    }, timeoutMs);
    child.on('exit', (code) => {
      clearTimeout(timer);
      if (code === 0) resolve(stdout);
      else reject(new Error(`${file} exited with ${code}\n${stderr}`));
    });
  });
}
