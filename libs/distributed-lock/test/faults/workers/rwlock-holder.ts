/**
 * A separate OS process using one read-write lock, for fault tests. Events
 * are JSON lines on stdout: `ready` (connected), `acquired`
 * `{ token, fencingToken }`, `lost` `{ reason }` (the handle's signal
 * aborted), `done` `{ reads, writes }`, `error` `{ message }`.
 *
 * Usage: node --import @swc-node/register/esm-register rwlock-holder.ts
 *   '{"url":..., "name":..., "mode":"write", "leaseTime":1000}'
 */
import { Logger } from '@nestjs/common';
import { Redis } from 'ioredis';
import { fencedResourceClient } from '../../../../../test/support/fenced-resource-client.js';
import { ReadWriteLockService } from '../../../src/rwlock/read-write-lock.service.js';
import { RedisSemaphoreBackend } from '../../../src/semaphore/redis/redis-semaphore-backend.js';
import {
  emitEvent as emit,
  stayWhileParentLives,
} from '../../../../../test/support/workers/child-life.js';

interface Options {
  readonly url: string;
  readonly name: string;
  /** The side to take and hold (ignored with `churn`). */
  readonly mode: 'read' | 'write';
  /** The watchdog lease: the bound on this process's hold after it dies. */
  readonly leaseTime: number;
  /**
   * Churn instead of holding: `callers` concurrent callers take the lock
   * for `forMs`, every third time to write, reporting each critical section
   * to the fenced resource at `referee` (writers also write their token);
   * then `done` and exit 0.
   */
  readonly churn?: {
    readonly callers: number;
    readonly forMs: number;
    readonly referee: string;
  };
}

const options = JSON.parse(process.argv[2] ?? '{}') as Options;
Logger.overrideLogger(false);

stayWhileParentLives();

const client = new Redis(options.url, { maxRetriesPerRequest: 1 });
client.on('error', () => undefined);
const locks = new ReadWriteLockService({
  backend: new RedisSemaphoreBackend({ client, ownsClient: true }),
  keyPrefix: 'fault:',
  leaseTime: options.leaseTime,
  waitTime: 10_000,
  maxKeyLength: 200,
});

async function churn(churning: NonNullable<Options['churn']>): Promise<void> {
  const referee = fencedResourceClient(churning.referee);
  const until = performance.now() + churning.forMs;
  let reads = 0;
  let writes = 0;
  const caller = async (c: number) => {
    for (let i = c; performance.now() < until; i++) {
      const writing = i % 3 === 0;
      const who = `${writing ? 'w' : 'r'}-${process.pid}-${c}`;
      const critical = async (fencingToken?: number) => {
        await referee.enter(who, fencingToken);
        if (fencingToken !== undefined) await referee.write(fencingToken, who);
        await new Promise((resolve) => setTimeout(resolve, 3));
        await referee.leave(who);
      };
      if (writing) {
        await locks.withWrite(options.name, (h) => critical(h.fencingToken));
        writes += 1;
      } else {
        await locks.withRead(options.name, () => critical());
        reads += 1;
      }
    }
  };
  await Promise.all(
    Array.from({ length: churning.callers }, (_, c) => caller(c)),
  );
  emit('done', { reads, writes });
  await locks.close();
  process.exit(0);
}

try {
  await client.ping();
  emit('ready', { pid: process.pid });
  if (options.churn) await churn(options.churn);
  const handle =
    options.mode === 'write'
      ? await locks.write(options.name)
      : await locks.read(options.name);
  // Listen before saying `acquired`, after which a SIGSTOP may land at once.
  const { signal } = handle;
  const onLost = () => emit('lost', { reason: String(signal.reason) });
  if (signal.aborted) onLost();
  else signal.addEventListener('abort', onLost, { once: true });
  emit('acquired', { token: handle.token, fencingToken: handle.fencingToken });
} catch (error) {
  emit('error', { message: (error as Error).message });
  process.exit(1);
}
