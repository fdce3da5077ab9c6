import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import {
  DATA_DIR_LOCK_FILE,
  DataDirectoryLockedError,
  lockDataDirectory,
} from '../src/database/embedded-db-lock.js';

const exited = (child: ChildProcess) =>
  new Promise((resolve) => child.once('exit', resolve));

/** The data directory's owner file: a new host waits for the previous owner's process to be gone. */
describe('lockDataDirectory', () => {
  let dir: string;
  let other: ChildProcess | undefined;
  const lockFile = () => path.join(dir, DATA_DIR_LOCK_FILE);

  beforeEach(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'flash-sale-lock-'));
  });
  afterEach(async () => {
    other?.kill('SIGKILL');
    other = undefined;
    await rm(dir, { recursive: true, force: true });
  });

  it('takes a directory whose owner has exited (a host killed with SIGKILL), and releases it', async () => {
    other = spawn('true');
    await exited(other);
    await writeFile(lockFile(), `${other.pid}\n`);
    const release = await lockDataDirectory(dir, 0);
    expect(await readFile(lockFile(), 'utf8')).toBe(`${process.pid}\n`);
    await release();
    await expect(readFile(lockFile(), 'utf8')).rejects.toThrow(/ENOENT/);
  });

  it('refuses a directory whose owner still runs, saying what to do', async () => {
    other = spawn('sleep', ['30']);
    await writeFile(lockFile(), `${other.pid}\n`);
    const error = await lockDataDirectory(dir, 300).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DataDirectoryLockedError);
    expect((error as Error).message).toMatch(
      new RegExp(
        `in use by process ${other.pid}.*Stop that process.*EMBEDDED_DB_DIR`,
      ),
    );
    expect(await readFile(lockFile(), 'utf8')).toBe(`${other.pid}\n`);
  });

  it('waits for an owner that is exiting, then takes the directory', async () => {
    other = spawn('sleep', ['30']);
    await writeFile(lockFile(), `${other.pid}\n`);
    const locking = lockDataDirectory(dir, 5_000);
    setTimeout(() => other?.kill('SIGKILL'), 300);
    const startedAt = Date.now();
    await locking;
    expect(Date.now() - startedAt).toBeGreaterThanOrEqual(250);
    expect(await readFile(lockFile(), 'utf8')).toBe(`${process.pid}\n`);
  });

  it('leaves the file alone on release when another process owns it by then', async () => {
    const release = await lockDataDirectory(dir, 0);
    await writeFile(lockFile(), '4242\n');
    await release();
    expect(await readFile(lockFile(), 'utf8')).toBe('4242\n');
  });
});
