import { readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * The data directory's owner file, a second safety behind the port: the
 * port says who may host, this file says which process last opened the
 * directory. A host writes its pid there before opening PGlite and removes
 * it after closing PGlite; a host that was killed leaves it behind, naming
 * a process that is gone. Before opening the directory, the next host waits
 * until that process has really exited (a zombie counts as exited: it holds
 * no file any more), so that PGlite is never open in two processes at once,
 * even when another port was configured for the same directory.
 */

export const DATA_DIR_LOCK_FILE = 'flash-sale-host.lock';

/** Thrown when a live process other than this one still owns the data directory. */
export class DataDirectoryLockedError extends Error {
  constructor(
    readonly dataDir: string,
    readonly ownerPid: number,
  ) {
    super(
      `The embedded database directory ${dataDir} is in use by process ${ownerPid} ` +
        `(see ${path.join(dataDir, DATA_DIR_LOCK_FILE)}). Stop that process, or give ` +
        `this instance another EMBEDDED_DB_DIR; if process ${ownerPid} is not a ` +
        'flash-sale instance, delete that file.',
    );
    this.name = 'DataDirectoryLockedError';
  }
}

/**
 * Waits up to `waitMs` for the directory's previous owner to be gone, then
 * records this process as the owner. Resolves a function that releases it.
 */
export async function lockDataDirectory(
  dataDir: string,
  waitMs: number,
): Promise<() => Promise<void>> {
  const file = path.join(dataDir, DATA_DIR_LOCK_FILE);
  const deadline = Date.now() + waitMs;
  for (;;) {
    const owner = await readOwner(file);
    if (owner === undefined || owner === process.pid || !(await isAlive(owner)))
      break;
    if (Date.now() >= deadline)
      throw new DataDirectoryLockedError(dataDir, owner);
    await sleep(100);
  }
  await writeFile(file, `${process.pid}\n`);
  return async () => {
    if ((await readOwner(file)) === process.pid)
      await rm(file, { force: true });
  };
}

async function readOwner(file: string): Promise<number | undefined> {
  try {
    const pid = Number.parseInt(await readFile(file, 'utf8'), 10);
    return Number.isSafeInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

/** Whether process `pid` exists and is not a zombie (Linux tells via /proc). */
async function isAlive(pid: number): Promise<boolean> {
  try {
    process.kill(pid, 0);
  } catch (error) {
    return (error as { code?: unknown }).code === 'EPERM';
  }
  try {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
    const state = stat.charAt(stat.lastIndexOf(')') + 2);
    return state !== 'Z' && state !== 'X';
  } catch {
    return true; // no /proc: signal 0 said it exists
  }
}
