import { Redis } from 'ioredis';
import IORedis4 from 'ioredis4';

/** An ioredis (the project's version) client at its defaults, errors swallowed (the run reports them). */
export async function connectIoredis(url: string): Promise<Redis> {
  const client = new Redis(url, { lazyConnect: true });
  client.on('error', () => undefined);
  await client.connect();
  return client;
}

/** An ioredis 4 client (for redlock 4, which calls the v4 callback API). */
export async function connectIoredis4(url: string): Promise<IORedis4.Redis> {
  const client = new IORedis4(url, { lazyConnect: true });
  client.on('error', () => undefined);
  await client.connect();
  return client;
}

/** Closes clients politely, falling back to a hard disconnect. */
export async function quitAll(
  clients: readonly { quit(): Promise<unknown>; disconnect(): void }[],
): Promise<void> {
  await Promise.all(
    clients.map((client) =>
      client.quit().catch(() => {
        client.disconnect();
      }),
    ),
  );
}
