import type { Redis } from 'ioredis';

/**
 * A MONITOR connection beside `client`, resolved once it monitors.
 *
 * ioredis's own `monitor()` fails now and then with "Command queue state
 * error": a command that another client runs just as MONITOR is answered can
 * arrive in the same packet as its "OK", before ioredis has switched the
 * connection to monitoring, and the stray line has no command to answer. That
 * line came before monitoring began and is of no interest, so errors on this
 * connection are ignored; tests that need to see a command sync on a marker
 * sent after this resolves.
 */
export function openMonitor(client: Redis, timeoutMs = 5_000): Promise<Redis> {
  const monitor = client.duplicate({ monitor: true, lazyConnect: false });
  monitor.on('error', () => undefined);
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      monitor.disconnect();
      reject(new Error(`MONITOR did not start within ${timeoutMs} ms`));
    }, timeoutMs);
    monitor.once('monitoring', () => {
      clearTimeout(timer);
      resolve(monitor);
    });
  });
}
