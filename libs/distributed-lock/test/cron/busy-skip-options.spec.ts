/**
 * Checks of `onBusy` and `minHoldTime`: bad values fail when the class is
 * defined, and `onBusy: 'skip'` on a handler whose caller waits for an
 * answer (an HTTP route, a `@MessagePattern`) stops the app at bootstrap,
 * whichever side of the route decorator it is on. In-memory backend.
 */
import { Controller, Injectable, Post, type Type } from '@nestjs/common';
import { EventPattern, MessagePattern } from '@nestjs/microservices';
import { Test } from '@nestjs/testing';
import {
  DistributedLock,
  DistributedLockModule,
  MemoryLockBackend,
  type DistributedLockOptions,
} from '@app/distributed-lock';

/** Defines a class with one method decorated with `options`. */
function defineWith(options: unknown): () => void {
  return () => {
    class Job {
      @DistributedLock('job', options as DistributedLockOptions)
      run(): void {}
    }
    void Job;
  };
}

it.each([
  [
    { onBusy: 'later' },
    TypeError,
    /onBusy must be 'throw' or 'skip', got later/,
  ],
  [{ onBusy: null }, TypeError, /onBusy/],
  [{ minHoldTime: '500' }, TypeError, /minHoldTime must be a number/],
  [{ minHoldTime: -1 }, RangeError, /minHoldTime must be a non-negative/],
  [{ minHoldTime: Number.NaN }, RangeError, /minHoldTime/],
  [{ minHoldTime: Infinity }, RangeError, /minHoldTime/],
  [
    { minHoldTime: 2_000, leaseTime: 1_000 },
    RangeError,
    /must not exceed leaseTime/,
  ],
  [null, TypeError, /options must be an object/],
])('rejects %j when the class is defined', (options, type, message) => {
  expect(defineWith(options)).toThrow(type);
  expect(defineWith(options)).toThrow(message);
  expect(defineWith(options)).toThrow(/Job\.run/);
});

it.each([
  [{}],
  [{ onBusy: 'throw' }],
  [{ onBusy: 'skip', minHoldTime: 0 }],
  [{ minHoldTime: 1_000, leaseTime: 1_000 }],
])('accepts %j', (options) => {
  expect(defineWith(options)).not.toThrow();
});

@Controller('jobs')
class SkipBelowRoute {
  @Post()
  @DistributedLock('job', { onBusy: 'skip' })
  run(): void {}
}

@Controller('jobs')
class SkipAboveRoute {
  @DistributedLock('job', { onBusy: 'skip' })
  @Post()
  run(): void {}
}

@Controller()
class SkipOnMessage {
  @MessagePattern('job')
  @DistributedLock('job', { onBusy: 'skip' })
  run(data: unknown): unknown {
    return data;
  }
}

@Controller()
class SkipOnEvent {
  @EventPattern('job')
  @DistributedLock('job', { onBusy: 'skip' })
  run(data: unknown): unknown {
    return data;
  }
}

@Injectable()
class SkipOnProvider {
  @DistributedLock('job', { onBusy: 'skip' })
  run(): void {}
}

@Controller('jobs')
class ThrowOnRoute {
  @Post()
  @DistributedLock('job', { onBusy: 'throw', minHoldTime: 100 })
  run(): void {}
}

async function bootstrap(controllers: Type[], providers: Type[] = []) {
  const app = await Test.createTestingModule({
    imports: [
      DistributedLockModule.forRoot({ backend: new MemoryLockBackend() }),
    ],
    controllers,
    providers,
  }).compile();
  try {
    await app.init();
  } finally {
    await app.close();
  }
}

it.each([
  ['SkipBelowRoute.run', SkipBelowRoute, 'an HTTP route'],
  ['SkipAboveRoute.run', SkipAboveRoute, 'an HTTP route'],
  ['SkipOnMessage.run', SkipOnMessage, 'a @MessagePattern handler'],
])(
  "stops the app at bootstrap for onBusy: 'skip' on %s",
  async (label, controller, kind) => {
    const failure = bootstrap([controller]);
    await expect(failure).rejects.toBeInstanceOf(TypeError);
    await expect(bootstrap([controller])).rejects.toThrow(
      `@DistributedLock on ${label}: onBusy: 'skip' does not fit ${kind}`,
    );
  },
);

it("starts with onBusy: 'skip' on event handlers and providers, and minHoldTime on routes", async () => {
  await expect(
    bootstrap([SkipOnEvent, ThrowOnRoute], [SkipOnProvider]),
  ).resolves.toBeUndefined();
});
