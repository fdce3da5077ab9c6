import { readFileSync } from 'node:fs';

import type { Redis } from 'ioredis';

import { blockEventLoopUntil } from './lock-fixtures.js';

/**
 * Bytes that reached the IPv4 TCP socket bound to local port `localPort` and
 * were not read yet: its `rx_queue` in `/proc/net/tcp`. A test that blocks
 * its own event loop reads this synchronously to know that an answer has
 * arrived although nothing could read it. `undefined` where that cannot be
 * told: no `/proc` (not Linux), or no such socket.
 */
export function unreadBytes(localPort: number): number | undefined {
  let table: string;
  try {
    table = readFileSync('/proc/net/tcp', 'utf8');
  } catch {
    return undefined;
  }
  const port = localPort.toString(16).toUpperCase().padStart(4, '0');
  for (const line of table.split('\n').slice(1)) {
    // sl local_address rem_address st tx_queue:rx_queue ...
    const [, local, , , queues] = line.trim().split(/\s+/);
    if (local?.endsWith(`:${port}`) && queues !== undefined)
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
  const ports = clients.map((client) => {
    const port = client.stream?.localPort;
    if (port === undefined) throw new Error('a client is not connected');
    return port;
  });
  // Where /proc cannot tell (not Linux), only the time is waited.
  const arrived = () =>
    ports.every((port) => (unreadBytes(port) ?? minBytes) >= minBytes);
  return blockEventLoopUntil(ms, arrived, maxMs);
}
