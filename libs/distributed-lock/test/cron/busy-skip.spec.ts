/**
 * `onBusy: 'skip'` and `minHoldTime` of `@DistributedLock`, on the in-memory
 * backend: two apps sharing one backend stand for two instances. No Redis
 * here; minimum-hold.redis.spec.ts covers Redis.
 */
import { Injectable } from '@nestjs/common';
import { Test, type TestingModule } from '@nestjs/testing';
import { lastValueFrom, Observable, of, toArray } from 'rxjs';
import {
  DistributedLock,
  DistributedLockModule,
  LockKeyError,
  LockNotAcquiredError,
  LockService,
  MemoryLockBackend,
} from '@app/distributed-lock';
import { eventually, sleep } from '../../../../test/support/lock-fixtures.js';
import { gate } from '../module/module-helpers.js';
import { LogRecorder } from './cron-helpers.js';

/** Long enough that a loaded machine's pauses stay well inside it. */
const holdMs = 600;

@Injectable()
class Jobs {
  runs = 0;
  /** Holds `slow` until opened. */
  hold = gate();

  @DistributedLock('job:quick', { onBusy: 'skip', minHoldTime: holdMs })
  async quick(): Promise<string> {
    this.runs += 1;
    return 'ran';
  }

  @DistributedLock('job:quick', { onBusy: 'skip', minHoldTime: holdMs })
  quickStream(): Observable<string> {
    this.runs += 1;
    return of('ran');
  }

  @DistributedLock('job:quick', { waitTime: 0 })
  async strict(): Promise<string> {
    this.runs += 1;
    return 'ran';
  }

  @DistributedLock('job:quick', { onBusy: 'skip', waitTime: 2_000 })
  async patient(): Promise<string> {
    this.runs += 1;
    return 'ran';
  }

  @DistributedLock('job:<0>', { onBusy: 'skip' })
  async keyed(id?: string): Promise<string | undefined> {
    return id;
  }

  @DistributedLock('job:slow', { onBusy: 'skip', minHoldTime: 100 })
  async slow(): Promise<void> {
    await this.hold.promise;
  }
}

const backend = new MemoryLockBackend();
const logs = new LogRecorder();
let first: TestingModule;
let second: TestingModule;

/** One "instance": an app on the shared backend. */
async function instance(): Promise<TestingModule> {
  const app = await Test.createTestingModule({
    imports: [DistributedLockModule.forRoot({ backend })],
    providers: [Jobs],
  }).compile();
  await app.init();
  return app;
}

beforeAll(async () => {
  first = await instance();
  second = await instance();
});

beforeEach(() => logs.start());

afterEach(async () => {
  logs.stop();
  // Whatever a test left held ends before the next.
  const locks = first.get(LockService);
  await eventually(
    async () =>
      !(await locks.isLocked('job:quick')) &&
      !(await locks.isLocked('job:slow')),
  );
  first.get(Jobs).runs = 0;
  second.get(Jobs).runs = 0;
});

afterAll(async () => {
  await second?.close();
  await first?.close();
});

it('skips quietly when busy: resolves undefined without running, logs at debug level only', async () => {
  const [a, b] = [first.get(Jobs), second.get(Jobs)];
  expect(await a.quick()).toBe('ran');
  // Within a's minimum hold: b's turn is gone.
  expect(await b.quick()).toBeUndefined();
  expect(b.runs).toBe(0);
  expect(logs.complaints).toEqual([]);
  expect(logs.at('debug', 'Jobs.quick skipped')).toHaveLength(1);
  expect(logs.at('debug', '"job:quick" is busy')).toHaveLength(1);
});

it("keeps today's default: busy rejects with LockNotAcquiredError", async () => {
  await first.get(Jobs).quick();
  await expect(second.get(Jobs).strict()).rejects.toBeInstanceOf(
    LockNotAcquiredError,
  );
});

it('does not skip other failures: a bad key still rejects', async () => {
  await expect(first.get(Jobs).keyed(undefined)).rejects.toBeInstanceOf(
    LockKeyError,
  );
  expect(await first.get(Jobs).keyed('7')).toBe('7');
});

it('completes an Observable empty when busy', async () => {
  const [a, b] = [first.get(Jobs), second.get(Jobs)];
  expect(await lastValueFrom(a.quickStream().pipe(toArray()))).toEqual(['ran']);
  expect(await lastValueFrom(b.quickStream().pipe(toArray()))).toEqual([]);
  expect(b.runs).toBe(0);
  expect(logs.complaints).toEqual([]);
});

it('keeps the lock minHoldTime from its acquisition, then frees it by itself', async () => {
  const locks = first.get(LockService);
  const startedAt = Date.now();
  await first.get(Jobs).quick();
  expect(await locks.isLocked('job:quick')).toBe(true);
  await sleep(100);
  expect(await second.get(Jobs).quick()).toBeUndefined();
  await sleep(holdMs - (Date.now() - startedAt) + 30);
  expect(await locks.isLocked('job:quick')).toBe(false);
  expect(await second.get(Jobs).quick()).toBe('ran');
});

it('hands the key to a queued waiter only once the minimum hold is over', async () => {
  const startedAt = Date.now();
  await first.get(Jobs).quick();
  // An explicit waitTime queues it even with 'skip'.
  const patient = second.get(Jobs).patient();
  expect(await patient).toBe('ran');
  expect(Date.now() - startedAt).toBeGreaterThanOrEqual(holdMs - 5);
});

it('defaults the wait of a skipping method to 0, whatever the module default', async () => {
  const slow = first.get(Jobs).slow();
  await sleep(20);
  const startedAt = Date.now();
  expect(await second.get(Jobs).slow()).toBeUndefined();
  // Waiting would have taken the module's 5 s.
  expect(Date.now() - startedAt).toBeLessThan(2_000);
  first.get(Jobs).hold.open();
  await slow;
  first.get(Jobs).hold = gate();
});

it('releases a method that ran past minHoldTime when it returns', async () => {
  const jobs = first.get(Jobs);
  const slow = jobs.slow();
  await sleep(150);
  jobs.hold.open();
  await slow;
  jobs.hold = gate();
  expect(await first.get(LockService).isLocked('job:slow')).toBe(false);
});
