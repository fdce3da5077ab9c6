/**
 * A separate OS process holding permits of one semaphore, for fault tests.
 * Events are JSON lines on stdout: `ready` (connected), `acquired`
 * `{ token, at }`, `lost` `{ reason, at }` (the handle's signal aborted),
 * `released` `{ result }`, `error` `{ message }`. SIGTERM releases and
 * exits 0.
 *
 * Usage: node --import @swc-node/register/esm-register semaphore-holder.ts
 *   '{"url":..., "name":..., "limit":2, "permits":2, "leaseTime":1000}'
 */
import { Logger } from '@nestjs/common';
import { Redis } from 'ioredis';
import { RedisSemaphoreBackend } from '../../../src/semaphore/redis/redis-semaphore-backend.js';
import { SemaphoreService } from '../../../src/semaphore/semaphore.service.js';
import {
  emitEvent as emit,
  stayWhileParentLives,
} from '../../../../../test/support/workers/child-life.js';

interface Options {
  readonly url: string;
  readonly name: string;
  readonly limit: number;
  readonly permits: number;
  /** The watchdog lease: the bound on this process's permits after it dies. */
  readonly leaseTime: number;
  /**
   * Churn instead of holding: `callers` concurrent callers take and give
   * back permits for `forMs`, counting holders in Redis (`<name>:inside`)
   * while they hold; then `done` `{ calls, most }` and exit 0.
   */
  readonly churn?: { readonly callers: number; readonly forMs: number };
}

const options = JSON.parse(process.argv[2] ?? '{}') as Options;
Logger.overrideLogger(false);

const keepAlive = stayWhileParentLives();

const client = new Redis(options.url, { maxRetriesPerRequest: 1 });
client.on('error', () => undefined);
const semaphores = new SemaphoreService({
  backend: new RedisSemaphoreBackend({ client, ownsClient: true }),
  keyPrefix: 'fault:',
  leaseTime: options.leaseTime,
  waitTime: 5_000,
  maxKeyLength: 200,
});

async function churn(callers: number, forMs: number): Promise<void> {
  const until = performance.now() + forMs;
  const counter = `fault:${options.name}:inside`;
  let calls = 0;
  let most = 0;
  const caller = async () => {
    while (performance.now() < until) {
      await semaphores.using(
        options.name,
        async () => {
          const inside = await client.incr(counter);
          most = Math.max(most, inside);
          await new Promise((resolve) => setTimeout(resolve, 3));
          await client.decr(counter);
          calls += 1;
        },
        { limit: options.limit, permits: options.permits },
      );
    }
  };
  await Promise.all(Array.from({ length: callers }, caller));
  emit('done', { calls, most });
  await semaphores.close();
  process.exit(0);
}

try {
  await client.ping();
  emit('ready', { pid: process.pid });
  if (options.churn) await churn(options.churn.callers, options.churn.forMs);
  const handle = await semaphores.acquire(options.name, {
    limit: options.limit,
    permits: options.permits,
  });
  // Listen before saying `acquired`, after which a SIGSTOP may land at once.
  const { signal } = handle;
  const onLost = () => emit('lost', { reason: String(signal.reason) });
  if (signal.aborted) onLost();
  else signal.addEventListener('abort', onLost, { once: true });
  emit('acquired', { token: handle.token });
  process.on('SIGTERM', () => {
    void handle.release().then(async (result) => {
      emit('released', { result });
      await semaphores.close();
      clearInterval(keepAlive);
      process.exit(0);
    });
  });
} catch (error) {
  emit('error', { message: (error as Error).message });
  process.exit(1);
}
