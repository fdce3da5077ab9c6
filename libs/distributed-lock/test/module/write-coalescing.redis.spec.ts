/**
 * Write coalescing: the commands of one event-loop turn leave in one socket
 * write per batch of `batchSize`, on the connections the module opens, and
 * arrive as before.
 */
import { Test, type TestingModule } from '@nestjs/testing';
import { Redis } from 'ioredis';
import { DistributedLockModule, LockService } from '@app/distributed-lock';
import {
  batchSize,
  coalesceWrites,
} from '../../src/backends/redis/write-coalescing.js';
import {
  startRedisServer,
  type RedisServerHandle,
} from '../../../../test/support/redis-server.js';

// Node's Writable hands a socket its writes through `_write` and `_writev`,
// one call per system call: counting those calls is counting writes.
/* oxlint-disable eslint/no-underscore-dangle */
type Socket = Redis['stream'] & {
  _write(...args: unknown[]): void;
  _writev?(...args: unknown[]): void;
};

/** Counts the writes Node hands the socket of `client` (one system call each). */
function countSocketWrites(client: Redis): { readonly count: number } {
  const socket = client.stream as Socket;
  const counter = { count: 0 };
  const write = socket._write.bind(socket);
  socket._write = (...args) => {
    counter.count += 1;
    write(...args);
  };
  const writev = socket._writev?.bind(socket);
  if (writev) {
    socket._writev = (...args) => {
      counter.count += 1;
      writev(...args);
    };
  }
  return counter;
}

/** Reads of client input Redis has done since it started. */
async function readsProcessed(observer: Redis): Promise<number> {
  const stats = await observer.info('stats');
  return Number(/total_reads_processed:(\d+)/.exec(stats)?.[1]);
}

let server: RedisServerHandle;
let observer: Redis;

beforeAll(async () => {
  server = await startRedisServer();
  observer = new Redis(server.url);
});

afterAll(async () => {
  observer.disconnect();
  await server.stop();
});

async function connected(): Promise<Redis> {
  const client = new Redis(server.url, { lazyConnect: true });
  await client.connect();
  return client;
}

async function lockService(
  options: { coalesceWrites?: boolean } = {},
): Promise<{ app: TestingModule; locks: LockService }> {
  const app = await Test.createTestingModule({
    imports: [DistributedLockModule.forRoot({ redis: server.url, ...options })],
  }).compile();
  await app.init();
  const locks = app.get(LockService);
  // The session is opened by the first acquisition: open it before counting.
  await (await locks.acquire('warm-up')).release();
  return { app, locks };
}

/** Redis's reads while 64 callers of one turn each take and release a lock. */
async function readsFor64Cycles(locks: LockService): Promise<number> {
  const before = await readsProcessed(observer);
  await Promise.all(
    Array.from({ length: 64 }, async (_, i) => {
      const handle = await locks.acquire(`module:${i}`);
      await handle.release();
    }),
  );
  // Less the INFO that read `before`.
  return (await readsProcessed(observer)) - before - 1;
}

describe('coalesceWrites()', () => {
  it('sends the commands of one turn in one write per batch, each answered as sent', async () => {
    const client = await connected();
    const restore = coalesceWrites(client);
    const writes = countSocketWrites(client);
    const replies = await Promise.all(
      Array.from({ length: 64 }, (_, i) =>
        client.set(`coalesced:${i}`, String(i), 'PX', 10_000, 'NX'),
      ),
    );
    expect(replies).toEqual(Array.from({ length: 64 }, () => 'OK'));
    // The first found the connection idle and went alone.
    expect(writes.count).toBe(1 + Math.ceil(63 / batchSize));
    expect(
      await client.mget(Array.from({ length: 64 }, (_, i) => `coalesced:${i}`)),
    ).toEqual(Array.from({ length: 64 }, (_, i) => String(i)));
    restore();
    client.disconnect();
  });

  it('writes a command on an idle connection at once, and the rest of its turn at its end', async () => {
    const client = await connected();
    coalesceWrites(client);
    const writes = countSocketWrites(client);
    const alone = client.set('idle:0', 'a');
    // Nothing was in flight: Redis need not wait for the turn to end.
    expect(writes.count).toBe(1);
    await alone;
    const burst = Array.from({ length: 8 }, (_, i) =>
      client.set(`idle:${i}`, String(i)),
    );
    expect(writes.count).toBe(2);
    await Promise.all(burst);
    // The first went alone, the other 7 together at the turn's end.
    expect(writes.count).toBe(3);
    client.disconnect();
  });

  it('writes a full batch at once and holds the rest of the turn for its end', async () => {
    const client = await connected();
    coalesceWrites(client);
    const writes = countSocketWrites(client);
    // In flight, so that the batch below is corked from its first command.
    const pending = client.set('batch:pending', 'x');
    const batch = Array.from({ length: batchSize }, (_, i) =>
      client.set(`batch:${i}`, String(i)),
    );
    // Written before the turn ends, so Redis can start on it.
    expect(writes.count).toBe(2);
    const rest = client.set('batch:rest', 'x');
    expect(writes.count).toBe(2);
    expect(await Promise.all([pending, ...batch, rest])).toEqual(
      Array.from({ length: batchSize + 2 }, () => 'OK'),
    );
    expect(writes.count).toBe(3);
    client.disconnect();
  });

  it('writes every command on its own once restored, as ioredis does', async () => {
    const client = await connected();
    coalesceWrites(client)();
    const writes = countSocketWrites(client);
    await Promise.all(
      Array.from({ length: 64 }, (_, i) => client.get(`coalesced:${i}`)),
    );
    // A write the kernel cannot take at once makes Node gather the next
    // ones; on loopback nearly all go alone.
    expect(writes.count).toBeGreaterThan(32);
    client.disconnect();
  });

  it('sends a command issued in a later turn in a write of its own, without waiting for earlier replies', async () => {
    const client = await connected();
    coalesceWrites(client);
    const writes = countSocketWrites(client);
    const first = client.set('turns:1', 'a');
    await new Promise((resolve) => setImmediate(resolve));
    const second = client.set('turns:2', 'b');
    expect(await Promise.all([first, second])).toEqual(['OK', 'OK']);
    expect(writes.count).toBe(2);
    client.disconnect();
  });

  it('answers commands sent before the connection was ready, and after it was cut', async () => {
    const client = new Redis(server.url, { lazyConnect: true });
    coalesceWrites(client);
    // Queued by ioredis until it has connected.
    expect(
      await Promise.all([client.set('queued:1', 'x'), client.incr('queued:n')]),
    ).toEqual(['OK', 1]);
    const id = await client.client('ID');
    await observer.client('KILL', 'ID', String(id));
    await new Promise((resolve) => client.once('ready', resolve));
    expect(
      await Promise.all([client.get('queued:1'), client.incr('queued:n')]),
    ).toEqual(['x', 2]);
    await client.del('queued:1', 'queued:n');
    client.disconnect();
  });
});

describe('the module', () => {
  it('coalesces the writes of the connection it opens, by default', async () => {
    const { app, locks } = await lockService();
    // 64 SETs in writes of a batch each, then 64 releases: a read or two
    // per write (98-108 reads with coalescing off).
    expect(await readsFor64Cycles(locks)).toBeLessThanOrEqual(
      4 * Math.ceil(64 / batchSize),
    );
    await app.close();
  });

  it('writes the command of a lock round at once on the idle quorum nodes it opens', async () => {
    const nodes = await Promise.all([1, 2, 3].map(() => startRedisServer()));
    const app = await Test.createTestingModule({
      imports: [
        DistributedLockModule.forRoot({ nodes: nodes.map((n) => n.url) }),
      ],
    }).compile();
    await app.init();
    try {
      const { backend } = app.get(LockService).healthSources;
      const clients = (backend as unknown as { options: { nodes: Redis[] } })
        .options.nodes;
      await Promise.all(clients.map((c) => c.ping()));
      // Idle: the module's start-up checks have had their answers too.
      const deadline = Date.now() + 2000;
      while (clients.some((c) => c.commandQueue.length > 0)) {
        expect(Date.now()).toBeLessThan(deadline);
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      const writes = clients.map(countSocketWrites);
      const pings = clients.map((c) => c.ping());
      // A lock round's command leaves each node's connection at once.
      expect(writes.map((w) => w.count)).toEqual([1, 1, 1]);
      await Promise.all(pings);
    } finally {
      await app.close();
      await Promise.all(nodes.map((n) => n.stop()));
    }
  });

  it('rejects a coalesceWrites that is not a boolean', async () => {
    await expect(
      lockService({ coalesceWrites: 'yes' as unknown as boolean }),
    ).rejects.toThrow(/coalesceWrites must be true or false/);
  });
});
