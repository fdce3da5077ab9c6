import { FencedResource, fencedResourceClient } from './fenced-resource.js';
import { createLockService, sleep } from './lock-fixtures.js';
import { startRedisServer, type RedisServerHandle } from './redis-server.js';

describe('FencedResource test helper', () => {
  it('accepts tokens not lower than the highest accepted, rejects lower ones', () => {
    const resource = new FencedResource();
    expect(resource.highest).toBe(0);
    expect(resource.write(3, 'a')).toBe(true);
    expect(resource.write(3, 'a')).toBe(true); // equal: the same holder again
    expect(resource.write(2, 'b')).toBe(false);
    expect(resource.write(7, 'c')).toBe(true);
    expect(resource.write(5, 'a')).toBe(false);
    expect(resource.highest).toBe(7);
    expect(resource.accepted).toBe(3);
    expect(resource.rejected).toBe(2);
    expect(resource.acceptedTokens).toEqual([3, 3, 7]);
    expect(resource.writes.map((w) => [w.writer, w.accepted])).toEqual([
      ['a', true],
      ['a', true],
      ['b', false],
      ['c', true],
      ['a', false],
    ]);
    expect(() => resource.write(Number.NaN)).toThrow(TypeError);
    expect(() => resource.write(-1)).toThrow(TypeError);
  });

  it('counts overlaps of holders in their critical sections', () => {
    const resource = new FencedResource();
    expect(resource.enter('a', 1)).toBe(false);
    expect(resource.enter('a', 1)).toBe(false); // nested: not an overlap
    resource.leave('a');
    expect(resource.inside).toEqual(['a']);
    expect(resource.enter('b', 2)).toBe(true);
    expect(resource.enter('c')).toBe(true);
    expect(resource.overlaps).toBe(2);
    expect(resource.maxInside).toBe(3);
    expect(resource.overlapLog[0]).toMatchObject({
      writer: 'b',
      token: 2,
      inside: [{ writer: 'a', token: 1 }],
    });
    resource.leave('a');
    resource.leave('b');
    resource.leave('c');
    expect(resource.inside).toEqual([]);
    expect(resource.enter('d')).toBe(false);
    expect(resource.overlaps).toBe(2);
    expect(() => resource.leave('nobody')).toThrow(/without being inside/);
  });

  it('serves the same operations over HTTP', async () => {
    const resource = new FencedResource();
    const url = await resource.serve();
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(await resource.serve()).toBe(url);
    try {
      const client = fencedResourceClient(url);
      expect(await client.write(4, 'remote')).toBe(true);
      expect(await client.write(2)).toBe(false);
      expect(await client.enter('x', 4)).toBe(false);
      expect(await client.enter('y', 5)).toBe(true);
      await client.leave('x');
      await client.leave('y');
      await expect(client.leave('x')).rejects.toThrow(/without being inside/);
      await expect(client.write(Number.NaN)).rejects.toThrow(/token/);

      expect(resource.acceptedTokens).toEqual([4]);
      expect(resource.writes[0].writer).toBe('remote');
      expect(resource.rejected).toBe(1);
      expect(resource.overlaps).toBe(1);
      expect(resource.inside).toEqual([]);
    } finally {
      await resource.close();
      await resource.close(); // idempotent
    }
    await expect(fencedResourceClient(url).write(9)).rejects.toThrow();
    expect(resource.highest).toBe(4);
  });

  describe('with real locks', () => {
    let server: RedisServerHandle;

    beforeAll(async () => {
      server = await startRedisServer();
    });

    afterAll(async () => {
      await server.stop();
    });

    it('rejects the write of a holder whose lease ran out', async () => {
      const a = createLockService(server.url);
      const b = createLockService(server.url);
      const resource = new FencedResource();
      try {
        const first = await a.locks.acquire('fenced', { leaseTime: 150 });
        const firstFence = await first.fence();
        expect(resource.enter('a', firstFence)).toBe(false);
        expect(resource.write(firstFence, 'a')).toBe(true);

        await sleep(200); // a's lease runs out while it still "works"
        const second = await b.locks.acquire('fenced', { waitTime: 0 });
        const secondFence = await second.fence();
        expect(secondFence).toBeGreaterThan(firstFence);
        expect(resource.enter('b', secondFence)).toBe(true);
        expect(resource.write(secondFence, 'b')).toBe(true);
        expect(resource.write(firstFence, 'a')).toBe(false); // stale

        expect(resource.acceptedTokens).toEqual([firstFence, secondFence]);
        expect(resource.overlaps).toBe(1);
        expect(await second.release()).toBe(true);
        expect(await first.release()).toBe(false);
      } finally {
        await a.close();
        await b.close();
      }
    });
  });
});
