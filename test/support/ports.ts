import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Asks the kernel for a free TCP port on 127.0.0.1: binds port 0, reads the
 * port it was given and closes the socket again.
 *
 * The port is only *likely* to stay free until the caller binds it; callers
 * that start a server on it should retry with a new port if the bind fails.
 */
export function getFreePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.once('error', reject);
    server.listen({ port: 0, host: '127.0.0.1', exclusive: true }, () => {
      const address = server.address();
      if (address === null || typeof address === 'string') {
        server.close();
        reject(new Error(`Unexpected server address: ${String(address)}`));
        return;
      }
      const { port } = address;
      server.close((error) => (error ? reject(error) : resolve(port)));
    });
  });
}

/**
 * Resolves once a TCP connection to `host:port` succeeds, retrying every 50ms.
 * Rejects when nothing accepts a connection within `timeoutMs`.
 */
export async function waitForPort(
  port: number,
  host = '127.0.0.1',
  timeoutMs = 10_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  while (Date.now() < deadline) {
    const remaining = Math.max(1, deadline - Date.now());
    try {
      await tryConnect(port, host, Math.min(remaining, 1_000));
      return;
    } catch (error) {
      lastError = error;
    }
    await sleep(Math.min(50, Math.max(0, deadline - Date.now())));
  }
  throw new Error(
    `Timed out after ${timeoutMs}ms waiting for ${host}:${port} to accept connections`,
    { cause: lastError },
  );
}

function tryConnect(
  port: number,
  host: string,
  timeoutMs: number,
): Promise<void> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ port, host });
    socket.setTimeout(timeoutMs);
    socket.once('connect', () => {
      socket.destroy();
      resolve();
    });
    socket.once('timeout', () => {
      socket.destroy();
      reject(new Error(`Connecting to ${host}:${port} timed out`));
    });
    socket.once('error', (error) => {
      socket.destroy();
      reject(error);
    });
  });
}
