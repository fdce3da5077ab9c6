/**
 * `@DistributedLock` with `@nestjs/schedule`'s `@Cron` and `@Interval`, on
 * either side of them: the scheduler finds the job and runs it under the
 * lock, and a busy lock with `onBusy: 'skip'` lets the turn go without the
 * error the scheduler logs for a job that throws. In-memory backend.
 */
import { Injectable } from '@nestjs/common';
import {
  Cron,
  Interval,
  ScheduleModule,
  SchedulerRegistry,
} from '@nestjs/schedule';
import { Test, type TestingModule } from '@nestjs/testing';
import {
  DistributedLock,
  DistributedLockModule,
  LockService,
  MemoryLockBackend,
  currentLock,
} from '@app/distributed-lock';
import { eventually, sleep } from '../../../../test/support/lock-fixtures.js';
import { LogRecorder } from './cron-helpers.js';

const skip = { onBusy: 'skip' } as const;

@Injectable()
class Scheduled {
  /** The keys each job held while it ran, by job. */
  readonly held = new Map<string, string[][]>();

  @Cron('* * * * * *', { name: 'cron-above' })
  @DistributedLock('sched:cron-above', skip)
  cronAbove(): void {
    this.record('cron-above');
  }

  @DistributedLock('sched:lock-above-cron', skip)
  @Cron('* * * * * *', { name: 'lock-above-cron' })
  lockAboveCron(): void {
    this.record('lock-above-cron');
  }

  @Interval('interval-above', 30)
  @DistributedLock('sched:interval-above', skip)
  intervalAbove(): void {
    this.record('interval-above');
  }

  @DistributedLock('sched:lock-above-interval', skip)
  @Interval('lock-above-interval', 30)
  lockAboveInterval(): void {
    this.record('lock-above-interval');
  }

  @Interval('throwing', 30)
  @DistributedLock('sched:throwing', { waitTime: 0 })
  throwing(): void {
    this.record('throwing');
  }

  runs(job: string): number {
    return this.held.get(job)?.length ?? 0;
  }

  private record(job: string): void {
    const runs = this.held.get(job) ?? [];
    runs.push([...(currentLock()?.keys ?? [])]);
    this.held.set(job, runs);
  }
}

const logs = new LogRecorder();
let app: TestingModule;

beforeAll(async () => {
  app = await Test.createTestingModule({
    imports: [
      ScheduleModule.forRoot(),
      DistributedLockModule.forRoot({ backend: new MemoryLockBackend() }),
    ],
    providers: [Scheduled],
  }).compile();
  // After compile, which sets the testing module's own logger.
  logs.start();
  await app.init();
});

afterAll(async () => {
  await app?.close();
  logs.stop();
});

it.each([
  ['cron-above', 'sched:cron-above'],
  ['lock-above-cron', 'sched:lock-above-cron'],
  ['interval-above', 'sched:interval-above'],
  ['lock-above-interval', 'sched:lock-above-interval'],
])('%s: the scheduler runs the job under its lock', async (job, key) => {
  const scheduled = app.get(Scheduled);
  // A cron job on every second ticks within one (two on a loaded machine).
  await eventually(() => scheduled.runs(job) > 0, 3_000);
  expect(scheduled.held.get(job)?.[0]).toEqual([key]);
  const registry = app.get(SchedulerRegistry);
  const registered = job.includes('cron')
    ? registry.getCronJobs().has(job)
    : registry.getIntervals().includes(job);
  expect(registered).toBe(true);
});

it('lets busy turns go quietly with skip; without it the scheduler logs each one', async () => {
  const scheduled = app.get(Scheduled);
  const locks = app.get(LockService);
  const held = await Promise.all(
    ['sched:interval-above', 'sched:lock-above-interval', 'sched:throwing'].map(
      (key) => locks.acquire(key, { waitTime: 1_000 }),
    ),
  );
  const before = ['interval-above', 'lock-above-interval', 'throwing'].map(
    (job) => scheduled.runs(job),
  );
  logs.lines.length = 0;
  // Several 30 ms turns.
  await sleep(200);
  await Promise.all(held.map((handle) => handle.release()));
  const after = ['interval-above', 'lock-above-interval', 'throwing'].map(
    (job) => scheduled.runs(job),
  );
  expect(after).toEqual(before);

  const skipped = logs.at('debug', 'skipped');
  expect(skipped.some((l) => l.message.includes('intervalAbove'))).toBe(true);
  expect(skipped.some((l) => l.message.includes('lockAboveInterval'))).toBe(
    true,
  );
  // The scheduler's error log comes from the job without skip only.
  const errors = logs.at('error');
  expect(errors.length).toBeGreaterThan(0);
  expect(errors.every((l) => l.message.includes('sched:throwing'))).toBe(true);
});
