import { Redis } from 'ioredis';

/** An ioredis (the project's version) client at its defaults, errors swallowed (the run reports them). */
export async function connectIoredis(url: string): Promise<Redis> {
  const client = new Redis(url, { lazyConnect: true });
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
