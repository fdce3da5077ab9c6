/**
 * @DistributedLock on plain providers: a plain method, reentrancy through
 * another provider, and a method returning an Observable.
 */
import { Injectable } from '@nestjs/common';
import { Test, type TestingModule } from '@nestjs/testing';
import {
  clearAllButSessions,
  keysButSessions,
} from '../../../../test/support/clear-keys.js';
import { isObservable, Observable, type Subscriber } from 'rxjs';
import {
  DistributedLock,
  DistributedLockModule,
  LockKeyError,
  LockService,
  currentLock,
  type LockHandle,
} from '@app/distributed-lock';
import { eventually, sleep } from '../../../../test/support/lock-fixtures.js';
import { useModuleServer } from './module-server-fixture.js';

const fixture = useModuleServer(clearAllButSessions);

const stored = async (key: string) =>
  (await fixture.observer.exists(`lock:{${key}}`)) === 1;

// ---------------------------------------------------------------------------
// Plain providers

@Injectable()
class Inventory {
  inside = 0;
  maxInside = 0;
  readonly locks: LockHandle[] = [];
  /** The fencing token of each entry of `locks`, asked for while held. */
  readonly fences: number[] = [];

  @DistributedLock('stock:<0>')
  async reserve(sku: string, holdMs = 30): Promise<string> {
    const lock = currentLock();
    if (lock) {
      this.locks.push(lock);
      this.fences.push(await lock.fence());
    }
    this.maxInside = Math.max(this.maxInside, ++this.inside);
    await sleep(holdMs);
    this.inside--;
    return `reserved ${sku}`;
  }

  @DistributedLock('stock:<0>')
  async sellOut(sku: string): Promise<never> {
    await sleep(1);
    throw new Error(`no ${sku} left`);
  }

  // Not async: throws before any promise exists.
  @DistributedLock('stock:<0>')
  refuse(sku: string): Promise<never> {
    throw new Error(`${sku} is not for sale`);
  }

  // Not async: answers a plain value.
  @DistributedLock('stock:<0>')
  count(sku: string): Promise<number> {
    return sku.length as unknown as Promise<number>;
  }
}

/** Calls the decorated method from another provider, as application code does. */
@Injectable()
class Checkout {
  constructor(private readonly inventory: Inventory) {}

  buy(sku: string): Promise<string> {
    return this.inventory.reserve(sku);
  }
}

/** Decorated with the same key as Inventory.reserve, which it calls. */
@Injectable()
class Orders {
  constructor(private readonly inventory: Inventory) {}

  @DistributedLock('stock:<0>', { waitTime: 5_000 })
  async place(
    sku: string,
  ): Promise<{ outer?: LockHandle; outerFence?: number; inner: string }> {
    const outer = currentLock();
    const outerFence = await outer?.fence();
    const inner = await this.inventory.reserve(sku, 1);
    return { outer, outerFence, inner };
  }
}

/** A method declared to return an Observable: locked per subscription. */
@Injectable()
class Feed {
  readonly subscribers: Array<Subscriber<number>> = [];
  readonly calls: Array<{ channel: string; lock?: LockHandle }> = [];

  @DistributedLock('feed:<0>')
  watch(channel: string): Observable<number> {
    this.calls.push({ channel, lock: currentLock() });
    return new Observable<number>((subscriber) => {
      this.subscribers.push(subscriber);
    });
  }
}

describe('@DistributedLock on providers', () => {
  let app: TestingModule;
  let locks: LockService;

  beforeAll(async () => {
    app = await Test.createTestingModule({
      imports: [DistributedLockModule.forRoot({ redis: fixture.server.url })],
      providers: [Inventory, Checkout, Orders, Feed],
    }).compile();
    await app.init();
    locks = app.get(LockService);
  });

  afterAll(async () => {
    await app?.close();
  });

  describe('a plain method', () => {
    it('excludes concurrent calls and passes the return value through', async () => {
      const inventory = app.get(Inventory);
      const checkout = app.get(Checkout);
      inventory.maxInside = 0;

      const results = await Promise.all([
        checkout.buy('apple'),
        checkout.buy('apple'),
        checkout.buy('apple'),
      ]);
      expect(results).toEqual([
        'reserved apple',
        'reserved apple',
        'reserved apple',
      ]);
      expect(inventory.maxInside).toBe(1);
      expect(await stored('stock:apple')).toBe(false);
    });

    it('lets calls on different keys run side by side', async () => {
      const inventory = app.get(Inventory);
      inventory.maxInside = 0;
      await Promise.all([
        inventory.reserve('a', 100),
        inventory.reserve('b', 100),
      ]);
      expect(inventory.maxInside).toBe(2);
    });

    it('gives the method its lock through currentLock(), fencing tokens increasing', async () => {
      const inventory = app.get(Inventory);
      inventory.locks.length = 0;
      inventory.fences.length = 0;
      await app.get(Checkout).buy('kiwi');
      await app.get(Checkout).buy('kiwi');

      expect(inventory.locks).toHaveLength(2);
      const [first] = inventory.locks;
      expect(first.keys).toEqual(['stock:kiwi']);
      expect(first.signal).toBeInstanceOf(AbortSignal);
      expect(first.signal.aborted).toBe(false);
      expect(first.reentrant).toBe(false);
      const [firstFence, secondFence] = inventory.fences;
      expect(secondFence).toBeGreaterThan(firstFence);
      expect(currentLock()).toBeUndefined();
    });

    it('rejects with LockKeyError for an undefined argument, locking nothing', async () => {
      const inventory = app.get(Inventory);
      const callsBefore = inventory.locks.length;
      await expect(
        app.get(Checkout).buy(undefined as unknown as string),
      ).rejects.toBeInstanceOf(LockKeyError);
      expect(inventory.locks).toHaveLength(callsBefore);
      expect(await keysButSessions(fixture.observer)).toEqual([]);
    });

    it('releases the lock and passes the error on when the method throws', async () => {
      const inventory = app.get(Inventory);
      await expect(inventory.sellOut('plum')).rejects.toThrow('no plum left');
      expect(await stored('stock:plum')).toBe(false);
    });

    it('turns a synchronous throw into a rejection, releasing the lock first', async () => {
      const inventory = app.get(Inventory);
      let call: Promise<never> | undefined;
      expect(() => (call = inventory.refuse('fig'))).not.toThrow();
      await expect(call).rejects.toThrow('fig is not for sale');
      expect(await stored('stock:fig')).toBe(false);
      expect(await inventory.count('fig')).toBe(3);
      expect(await stored('stock:fig')).toBe(false);
    });
  });

  describe('reentrancy', () => {
    it('lets a decorated method call another one on the same key without deadlock', async () => {
      const inventory = app.get(Inventory);
      inventory.locks.length = 0;
      inventory.fences.length = 0;
      const startedAt = Date.now();

      const { outer, outerFence, inner } = await app.get(Orders).place('pear');

      expect(Date.now() - startedAt).toBeLessThan(1_000);
      expect(inner).toBe('reserved pear');
      const nested = inventory.locks.at(-1);
      expect(nested?.reentrant).toBe(true);
      expect(nested?.token).toBe(outer?.token);
      expect(inventory.fences.at(-1)).toBe(outerFence);
      expect(await stored('stock:pear')).toBe(false);
      expect(await locks.isLocked('stock:pear')).toBe(false);
    });
  });

  describe('a method returning an Observable', () => {
    it('returns an Observable at once, locks on subscribe and until complete', async () => {
      const feed = app.get(Feed);
      const result = feed.watch('news');

      expect(isObservable(result)).toBe(true);
      expect(result).not.toBeInstanceOf(Promise);
      await sleep(50);
      expect(feed.subscribers).toHaveLength(0);
      expect(await stored('feed:news')).toBe(false);

      const values: number[] = [];
      let completed = false;
      result.subscribe({
        next: (value) => values.push(value),
        complete: () => (completed = true),
      });
      await eventually(() => feed.subscribers.length === 1);
      expect(await stored('feed:news')).toBe(true);
      expect(feed.calls.at(-1)?.channel).toBe('news');
      expect(feed.calls.at(-1)?.lock?.keys).toEqual(['feed:news']);

      const source = feed.subscribers[0];
      source.next(1);
      source.next(2);
      await sleep(20);
      expect(values).toEqual([1, 2]);
      expect(await locks.tryAcquire('feed:news')).toBeNull();

      source.complete();
      expect(completed).toBe(true);
      await eventually(async () => !(await stored('feed:news')));
    });

    it('releases when the subscriber unsubscribes early', async () => {
      const feed = app.get(Feed);
      feed.subscribers.length = 0;
      const subscription = feed.watch('sports').subscribe();
      await eventually(() => feed.subscribers.length === 1);
      expect(await stored('feed:sports')).toBe(true);

      subscription.unsubscribe();
      expect(feed.subscribers[0].closed).toBe(true);
      await eventually(async () => !(await stored('feed:sports')));
    });

    it('releases when the stream errors', async () => {
      const feed = app.get(Feed);
      feed.subscribers.length = 0;
      let failure: unknown;
      feed.watch('weather').subscribe({ error: (error) => (failure = error) });
      await eventually(() => feed.subscribers.length === 1);
      expect(await stored('feed:weather')).toBe(true);

      feed.subscribers[0].error(new Error('feed broke'));
      expect(failure).toEqual(new Error('feed broke'));
      await eventually(async () => !(await stored('feed:weather')));
    });

    it('unsubscribing while waiting for a busy lock gives up without taking it', async () => {
      const feed = app.get(Feed);
      feed.subscribers.length = 0;
      const holder = await locks.acquire('feed:busy');
      const subscription = feed.watch('busy').subscribe();
      await sleep(50);
      subscription.unsubscribe();
      await holder.release();

      await sleep(100);
      expect(feed.subscribers).toHaveLength(0);
      expect(await stored('feed:busy')).toBe(false);
    });
  });
});
