import { readFileSync } from 'node:fs';

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
