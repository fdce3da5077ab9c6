/**
 * `@DistributedLock(key, { signal })`: a call's wait ends when the signal the
 * option returns aborts, with the reason as the error's cause, and the
 * method does not run. Two Nest apps on one redis-server stand for two
 * instances; the other instance holds the key.
 */
import { Injectable } from '@nestjs/common';
import { Test, type TestingModule } from '@nestjs/testing';
import { lastValueFrom, Observable, of } from 'rxjs';
import {
  DistributedLock,
  DistributedLockModule,
  LockNotAcquiredError,
  LockService,
} from '@app/distributed-lock';
import { sleep } from '../../../../test/support/lock-fixtures.js';
import {
  startRedisServer,
  type RedisServerHandle,
} from '../../../../test/support/redis-server.js';

/** Stands for an app service that knows when waiting is pointless. */
@Injectable()
class SoldOut {
  private readonly controllers = new Map<string, AbortController>();

  signalFor(item: string): AbortSignal {
    let controller = this.controllers.get(item);
    if (!controller) {
      controller = new AbortController();
      this.controllers.set(item, controller);
    }
    return controller.signal;
  }

  announce(item: string): void {
    this.controllers.get(item)?.abort(new Error(`${item} sold out`));
  }
}

@Injectable()
class Shop {
  runs = 0;

  constructor(readonly soldOut: SoldOut) {}

  @DistributedLock('item:<0>', {
    waitTime: 10_000,
    signal(this: Shop, item: string) {
      return this.soldOut.signalFor(item);
    },
  })
  async buy(item: string): Promise<string> {
    this.runs += 1;
    return `bought ${item}`;
  }

  @DistributedLock('item:<0>', {
    waitTime: 10_000,
    signal(this: Shop, item: string) {
      return this.soldOut.signalFor(item);
    },
  })
  buyStream(item: string): Observable<string> {
    this.runs += 1;
    return of(`bought ${item}`);
  }

  @DistributedLock('item:<0>', {
    waitTime: 10_000,
    signal: () => 'soon' as unknown as AbortSignal,
  })
  async misconfigured(item: string): Promise<string> {
    this.runs += 1;
    return item;
  }
}

let server: RedisServerHandle;
let shop: TestingModule;
let other: TestingModule;

const instance = async () => {
  const app = await Test.createTestingModule({
    imports: [DistributedLockModule.forRoot({ redis: server.url })],
    providers: [SoldOut, Shop],
  }).compile();
  await app.init();
  return app;
};

beforeAll(async () => {
  server = await startRedisServer();
  [shop, other] = await Promise.all([instance(), instance()]);
});

afterAll(async () => {
  await shop?.close();
  await other?.close();
  await server?.stop();
});

describe('@DistributedLock with a signal option', () => {
  it('stops a waiting call when the signal aborts: LockNotAcquiredError with the reason as cause, the method not run', async () => {
    const held = await other.get(LockService).acquire('item:a');
    const buyer = shop.get(Shop);
    const waiting = buyer.buy('a').then(
      () => undefined,
      (error: unknown) => error,
    );
    await sleep(150);
    const abortedAt = performance.now();
    shop.get(SoldOut).announce('a');
    const error = await waiting;
    expect(performance.now() - abortedAt).toBeLessThan(500);
    expect(error).toBeInstanceOf(LockNotAcquiredError);
    expect((error as LockNotAcquiredError).cause).toEqual(
      new Error('a sold out'),
    );
    expect(buyer.runs).toBe(0);
    // The key stays the other instance's, and nobody is queued behind it.
    expect(await held.release()).toBe(true);
    expect(await other.get(LockService).isLocked('item:a')).toBe(false);
  });

  it('changes nothing for a call whose signal does not abort: it runs once the key is free', async () => {
    const held = await other.get(LockService).acquire('item:b');
    const buyer = shop.get(Shop);
    const before = buyer.runs;
    const waiting = buyer.buy('b');
    await sleep(150);
    expect(await held.release()).toBe(true);
    expect(await waiting).toBe('bought b');
    expect(buyer.runs).toBe(before + 1);
  });

  it('stops an Observable method’s wait the same way', async () => {
    const held = await other.get(LockService).acquire('item:c');
    const buyer = shop.get(Shop);
    const before = buyer.runs;
    const waiting = lastValueFrom(buyer.buyStream('c')).then(
      () => undefined,
      (error: unknown) => error,
    );
    await sleep(150);
    shop.get(SoldOut).announce('c');
    const error = await waiting;
    expect(error).toBeInstanceOf(LockNotAcquiredError);
    expect((error as LockNotAcquiredError).cause).toEqual(
      new Error('c sold out'),
    );
    expect(buyer.runs).toBe(before);
    expect(await held.release()).toBe(true);
  });

  it('answers at once, without waiting, for a signal already aborted', async () => {
    const held = await other.get(LockService).acquire('item:d');
    const soldOut = shop.get(SoldOut);
    soldOut.signalFor('d');
    soldOut.announce('d');
    const startedAt = performance.now();
    await expect(shop.get(Shop).buy('d')).rejects.toBeInstanceOf(
      LockNotAcquiredError,
    );
    expect(performance.now() - startedAt).toBeLessThan(500);
    expect(await held.release()).toBe(true);
  });

  it('rejects a call whose signal option returns something else, before locking anything', async () => {
    const buyer = shop.get(Shop);
    const before = buyer.runs;
    await expect(buyer.misconfigured('e')).rejects.toThrow(
      /signal option returned soon, not an AbortSignal/,
    );
    expect(buyer.runs).toBe(before);
    expect(await shop.get(LockService).isLocked('item:e')).toBe(false);
  });

  it('refuses a signal option that is not a function when the class is defined', () => {
    expect(() => {
      class Broken {
        @DistributedLock('item:<0>', {
          signal: new AbortController().signal as unknown as () => undefined,
        })
        async buy(item: string): Promise<string> {
          return item;
        }
      }
      return Broken;
    }).toThrow(/signal must be a function/);
  });
});
