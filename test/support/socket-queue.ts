import { readFileSync } from 'node:fs';

import type { Redis } from 'ioredis';

import { blockEventLoopUntil } from './lock-fixtures.js';

/** A port as `/proc/net/tcp` writes it: four upper-case hex digits. */
export const hexPort = (port: number): string =>
  port.toString(16).toUpperCase().padStart(4, '0');

/**
 * Bytes that reached this process's IPv4 TCP connection from local port
 * `localPort` to `remotePort` and were not read yet: its `rx_queue` in
 * `/proc/net/tcp`. A test that blocks its own event loop reads this
 * synchronously to know that an answer has arrived although nothing could
 * read it. `undefined` where that cannot be told: no `/proc` (not Linux), or
 * no such connection.
 */
export function unreadBytes(
  localPort: number,
  remotePort: number,
): number | undefined {
  let table: string;
  try {
    table = readFileSync('/proc/net/tcp', 'utf8');
  } catch {
    return undefined;
  }
  const local = `:${hexPort(localPort)}`;
  const remote = `:${hexPort(remotePort)}`;
  for (const line of table.split('\n').slice(1)) {
    // sl local_address rem_address st tx_queue:rx_queue ...; the local
    // port alone is not enough: closed connections that used it linger in
    // TIME_WAIT (st 06), and only an established one (01) is this one.
    const [, from, to, state, queues] = line.trim().split(/\s+/);
    if (
      from?.endsWith(local) &&
      to?.endsWith(remote) &&
      state === '01' &&
      queues !== undefined
    )
      return parseInt(queues.split(':')[1], 16);
  }
  return undefined;
}

/**
 * Blocks this process's event loop for at least `ms`, as a long GC pause
 * would, and on until each client's socket holds at least `minBytes` of
 * answers nothing has read yet (at most `maxMs`): for tests of answers that
 * arrive in time but are read only after the process's own stall. How soon
 * Redis answers is then checked rather than assumed; a machine busy with
 * the rest of the suite need not schedule it within the block.
 */
export function blockUntilAnswersArrive(
  ms: number,
  clients: readonly Redis[],
  { minBytes = 1, maxMs = 10_000 } = {},
): number {
  const connections = clients.map(({ stream }) => {
    const { localPort, remotePort } = stream ?? {};
    if (localPort === undefined || remotePort === undefined)
      throw new Error('a client is not connected');
    return [localPort, remotePort] as const;
  });
  // Where /proc cannot tell (not Linux), only the time is waited.
  const arrived = () =>
    connections.every(
      ([local, remote]) => (unreadBytes(local, remote) ?? minBytes) >= minBytes,
    );
  return blockEventLoopUntil(
    ms,
    arrived,
    maxMs,
    `an answer on each of ${clients.length} connection(s)`,
  );
}
