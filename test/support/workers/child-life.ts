/**
 * What every test child process (a lock holder, a cron instance) does the
 * same way: tell its parent about events as JSON lines on stdout, and not
 * outlive the parent.
 */

/** Writes `{ event, ...fields, at }` as one JSON line on stdout (`at`: Date.now()). */
export function emitEvent(
  event: string,
  fields: Record<string, unknown> = {},
): void {
  process.stdout.write(
    `${JSON.stringify({ event, ...fields, at: Date.now() })}\n`,
  );
}

/**
 * Keeps the process alive until it is killed or exits on its own, and makes
 * it exit (code 3) once orphaned: a test that died without killing its
 * children leaves none behind. Returns the keep-alive timer, for a child that
 * wants to end on its own by clearing it.
 */
export function stayWhileParentLives(): NodeJS.Timeout {
  const keepAlive = setInterval(() => undefined, 1 << 30);
  const parentPid = process.ppid;
  setInterval(() => {
    if (process.ppid !== parentPid) process.exit(3);
  }, 500).unref();
  return keepAlive;
}
