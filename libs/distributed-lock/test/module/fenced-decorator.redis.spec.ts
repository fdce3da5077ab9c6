/** `@DistributedLock(key, { fence: true })`: the method runs with its fencing token in hand. */
import { Injectable } from '@nestjs/common';
import { Test, type TestingModule } from '@nestjs/testing';
import { Redis } from 'ioredis';
import {
  DistributedLock,
  DistributedLockModule,
  currentLock,
} from '@app/distributed-lock';
import {
  startRedisServer,
  type RedisServerHandle,
} from '../../../../test/support/redis-server.js';

@Injectable()
class Ledger {
  /** The fencing token each call of a fenced method saw on entry, before any await. */
  readonly tokensSeen: Array<number | undefined> = [];
  /** Whether the body of a misconfigured method ran. */
  misconfiguredRan = false;

  @DistributedLock('ledger:<0>', { fence: true })
  write(_account: string): Promise<number | undefined> {
    const token = currentLock()?.fencingToken;
    this.tokensSeen.push(token);
    return Promise.resolve(token);
  }

  /** Unfenced, on the same key as {@link write}, which it calls. */
  @DistributedLock('ledger:<0>')
  async audit(account: string): Promise<{
    before?: number;
    inner?: number;
    after?: number;
  }> {
    const before = currentLock()?.fencingToken;
    const inner = await this.write(account);
    return { before, inner, after: currentLock()?.fencingToken };
  }

  @DistributedLock('ledger:<0>', { fence: 'yes' as unknown as boolean })
  misconfigured(account: string): Promise<string> {
    this.misconfiguredRan = true;
    return Promise.resolve(account);
  }
}

let server: RedisServerHandle;
let observer: Redis;
let app: TestingModule;

beforeAll(async () => {
  server = await startRedisServer();
  observer = new Redis(server.url);
  app = await Test.createTestingModule({
    imports: [DistributedLockModule.forRoot({ redis: server.url })],
    providers: [Ledger],
  }).compile();
  await app.init();
});

afterAll(async () => {
  await app?.close();
  observer?.disconnect();
  await server?.stop();
});

/** The fencing counter of `name`'s lock in Redis. */
async function counterOf(name: string): Promise<number> {
  return Number(await observer.get(`lock:{${name}}:fence`));
}

describe('@DistributedLock with { fence: true }', () => {
  it('gives the method its fencing token through currentLock() before anything is awaited, rising call after call', async () => {
    const ledger = app.get(Ledger);
    const first = await ledger.write('alice');
    const second = await ledger.write('alice');
    expect(ledger.tokensSeen).toEqual([first, second]);
    expect(Number.isSafeInteger(first)).toBe(true);
    expect(second).toBeGreaterThan(first!);
    expect(second).toBe(await counterOf('ledger:alice'));
  });

  it('inside an unfenced lock on the same key, issues the token the outer hold shares from then on', async () => {
    const ledger = app.get(Ledger);
    const { before, inner, after } = await ledger.audit('bob');
    // An uncontended unfenced grant on one Redis carries no token.
    expect(before).toBeUndefined();
    expect(Number.isSafeInteger(inner)).toBe(true);
    expect(after).toBe(inner);
    expect(inner).toBe(await counterOf('ledger:bob'));
  });

  it('rejects a fence option that is not true or false with a TypeError, running nothing', async () => {
    const ledger = app.get(Ledger);
    await expect(ledger.misconfigured('carol')).rejects.toBeInstanceOf(
      TypeError,
    );
    expect(ledger.misconfiguredRan).toBe(false);
    expect(await observer.exists('lock:{ledger:carol}')).toBe(0);
  });
});
