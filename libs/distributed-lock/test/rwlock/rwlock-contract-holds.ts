/**
 * The read-write lock contract, part two (see rwlock-contract.ts): fencing
 * tokens, reentrancy, leases and the lost signal, typed errors.
 */
import { sleep } from '../../../../test/support/lock-fixtures.js';
import {
  LockKeyError,
  LockLostError,
  LockNotAcquiredError,
} from '../../src/errors/lock-errors.js';
import type { ReadWriteLockHandle } from '../../src/rwlock/read-write-lock-handle.js';
import {
  LockUpgradeError,
  ReadWriteLockNotAcquiredError,
} from '../../src/rwlock/rwlock-errors.js';
import {
  rejectionOf,
  type ReadWriteLockFactory,
  type ReadWriteLockWorld,
} from './rwlock-contract-support.js';

const WAIT = { waitTime: 10_000 } as const;

export function describeHoldContract(
  world: () => ReadWriteLockWorld,
  factory: ReadWriteLockFactory,
): void {
  it('gives writers strictly increasing fencing tokens, also after the lock went idle', async () => {
    const { services, name } = world();
    const tokens: number[] = [];
    for (const service of [...services, ...services]) {
      await service.withWrite(name, (handle) => {
        tokens.push(handle.fencingToken!);
      });
    }
    // A writer whose lease ran out, then a spell with nobody at all.
    const lapsed = await services[0].write(name, { leaseTime: 200 });
    tokens.push(lapsed.fencingToken!);
    await sleep(400);
    expect(lapsed.lost).toBe(true);
    const prefix = services[0].storeKey(name);
    if (factory.keysStartingWith) {
      await services[1].tryRead(name).then((r) => r?.release());
      // Idle: only the fencing counter is left.
      expect(await factory.keysStartingWith(prefix)).toEqual([
        `${prefix}:fence`,
      ]);
    }
    await services[2].withWrite(name, (handle) => {
      tokens.push(handle.fencingToken!);
    });
    expect(tokens.every(Number.isSafeInteger)).toBe(true);
    for (let i = 1; i < tokens.length; i++)
      expect(tokens[i]).toBeGreaterThan(tokens[i - 1]);
  });

  it('lets a writer read and write again inside its hold, freeing the lock with the outer hold', async () => {
    const [a, b] = world().services;
    const { name } = world();
    await a.withWrite(name, async (outer) => {
      const started = performance.now();
      const read = await a.read(name, WAIT);
      const write = await a.write(name, WAIT);
      expect(performance.now() - started).toBeLessThan(100);
      expect([read.reentrant, write.reentrant]).toEqual([true, true]);
      expect(read.mode).toBe('read');
      expect(read.fencingToken).toBe(outer.fencingToken);
      expect(write.token).toBe(outer.token);
      expect(await read.release()).toBe(true);
      expect(await write.release()).toBe(true);
      // Still held by the outer hold.
      expect(await b.tryRead(name)).toBeNull();
    });
    const after = await b.tryRead(name);
    expect(after).not.toBeNull();
    await after!.release();
  });

  it('lets a reader read again inside its hold, even with a writer queued', async () => {
    const [a, b, c] = world().services;
    const { name } = world();
    let writer: Promise<ReadWriteLockHandle> | undefined;
    await a.withRead(name, async () => {
      writer = b.write(name, WAIT);
      await sleep(100);
      const inner = await a.read(name);
      expect(inner.reentrant).toBe(true);
      await inner.release();
      // A new reader outside the chain waits behind the writer.
      expect(await c.tryRead(name)).toBeNull();
    });
    const granted = await writer!;
    expect(granted.mode).toBe('write');
    await granted.release();
  });

  it('refuses at once to upgrade a read hold to a write hold', async () => {
    const [a, b] = world().services;
    const { name } = world();
    await a.withRead(name, async () => {
      const started = performance.now();
      const error = await rejectionOf(a.write(name, WAIT));
      expect(performance.now() - started).toBeLessThan(100);
      expect(error).toBeInstanceOf(LockUpgradeError);
      expect(error).toMatchObject({ code: 'LOCK_UPGRADE_REFUSED', key: name });
      expect(await rejectionOf(a.tryWrite(name))).toBeInstanceOf(
        LockUpgradeError,
      );
      // Nothing was queued: another reader still gets in at once.
      const other = await b.tryRead(name);
      expect(other).not.toBeNull();
      await other!.release();
    });
  });

  it('tells the holder its hold is lost when the lease lapses, and lets the next one in', async () => {
    const [a, b] = world().services;
    const { name } = world();
    const held = await a.write(name, { leaseTime: 300 });
    const started = performance.now();
    const next = await b.write(name, WAIT);
    expect(performance.now() - started).toBeLessThan(1_500);
    expect(held.signal.aborted).toBe(true);
    expect(held.signal.reason).toBeInstanceOf(LockLostError);
    expect(await held.release()).toBe(false);
    expect(next.fencingToken).toBeGreaterThan(held.fencingToken!);
    await next.release();
  });

  it('keeps a watchdog hold past its lease', async () => {
    const [a, b] = world().services;
    const { name } = world();
    const held = await a.read(name);
    await sleep(1_500);
    expect(held.lost).toBe(false);
    expect(await b.tryWrite(name)).toBeNull();
    expect(await held.extend(2_000)).toBe(true);
    await held.release();
  });

  it('is busy with a typed error once the wait time runs out, and leaves the queue', async () => {
    const [a, b, c] = world().services;
    const { name } = world();
    const held = await a.write(name);
    const started = performance.now();
    const error = await rejectionOf(b.read(name, { waitTime: 300 }));
    expect(performance.now() - started).toBeGreaterThanOrEqual(280);
    expect(error).toBeInstanceOf(ReadWriteLockNotAcquiredError);
    expect(error).toBeInstanceOf(LockNotAcquiredError);
    expect(error).toMatchObject({
      code: 'LOCK_NOT_ACQUIRED',
      key: name,
      mode: 'read',
    });
    const stop = new AbortController();
    setTimeout(() => stop.abort(), 100);
    const aborted = await rejectionOf(
      c.write(name, { waitTime: 10_000, signal: stop.signal }),
    );
    expect(aborted).toBeInstanceOf(ReadWriteLockNotAcquiredError);
    await held.release();
    const next = await c.tryWrite(name);
    expect(next).not.toBeNull();
    await next!.release();
  });

  it('rejects bad names and options with typed errors', async () => {
    const [a] = world().services;
    const { name } = world();
    for (const bad of ['', 'a{b}', 'x'.repeat(300)])
      expect(await rejectionOf(a.read(bad))).toBeInstanceOf(LockKeyError);
    expect(await rejectionOf(a.write('a}'))).toBeInstanceOf(LockKeyError);
    expect(await rejectionOf(a.read(name, { waitTime: -1 }))).toBeInstanceOf(
      RangeError,
    );
    expect(await rejectionOf(a.write(name, { leaseTime: 0 }))).toBeInstanceOf(
      RangeError,
    );
    const held = await a.write(name);
    expect(await rejectionOf(held.extend(0))).toBeInstanceOf(RangeError);
    await held.release();
  });
}
