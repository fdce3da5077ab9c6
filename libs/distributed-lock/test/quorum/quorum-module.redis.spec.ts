import { Test, type TestingModule } from '@nestjs/testing';
import type { Redis } from 'ioredis';
import {
  DistributedLockModule,
  LockService,
  MemoryLockBackend,
  QuorumLockBackend,
} from '@app/distributed-lock';
import { eventually, ready, useQuorumNodes } from './quorum-fixtures.js';

const nodes = useQuorumNodes({ three: true });
const { opened } = nodes;

async function connections(client: Redis): Promise<number> {
  const list = (await client.client('LIST')) as string;
  return list.trim().split('\n').length;
}

/** Compiles an application with the module; rejects with its options error. */
function build(
  options: Parameters<typeof DistributedLockModule.forRoot>[0],
): Promise<TestingModule> {
  return Test.createTestingModule({
    imports: [DistributedLockModule.forRoot(options)],
  }).compile();
}

describe('DistributedLockModule with nodes', () => {
  it('locks on a quorum of the given nodes and closes only the connections it opened', async () => {
    const [look, given] = [
      opened.clients(nodes.three),
      opened.clients(nodes.three),
    ];
    await ready([...look, ...given]);
    const before = await connections(look[0]);
    const app: TestingModule = await Test.createTestingModule({
      imports: [
        DistributedLockModule.forRoot({
          // A URL, ioredis options and a client of the caller's.
          nodes: [
            nodes.three[0].url,
            { host: nodes.three[1].host, port: nodes.three[1].port },
            given[2],
          ],
        }),
      ],
    }).compile();
    await app.init();
    const locks = app.get(LockService);
    const handle = await locks.acquire('module:1', { waitTime: 0 });
    const stored = await Promise.all(look.map((c) => c.get('lock:{module:1}')));
    expect(stored).toEqual([handle.token, handle.token, handle.token]);
    expect(await handle.release()).toBe(true);
    await app.close();
    await eventually(async () => (await connections(look[0])) === before);
    expect(given[2].status).toBe('ready');
  });

  it('rejects an even or too small node count, and nodes beside backend', () => {
    const urls = nodes.three.map((s) => s.url);
    return Promise.all([
      expect(build({ nodes: urls.slice(0, 2) })).rejects.toThrow(
        /odd number \(3 or 5\)/,
      ),
      expect(build({ nodes: [urls[0]] })).rejects.toThrow(/got 1/),
      expect(
        build({ nodes: urls, backend: new MemoryLockBackend() }),
      ).rejects.toThrow(/either nodes or backend/),
    ]);
  });

  it('exports the backend for direct use', () => {
    expect(
      () =>
        new QuorumLockBackend({
          nodes: opened.clients(nodes.three).slice(0, 2),
        }),
    ).toThrow(/odd number of at least 3 nodes/);
  });
});
