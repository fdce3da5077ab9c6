import type { RedisLockBackend } from '../../libs/distributed-lock/src/backends/redis/redis-lock-backend.js';

/**
 * What an idle backend keeps nothing of: waiters, hand-offs, checks and
 * holds. (Its connections, and what forgets on its own, are left out.)
 */
const idleWhenDone = [
  'waiters',
  'waitedKeys',
  'acquiring',
  'earlyHandoffs',
  'claimed',
  'checks',
  'holds',
] as const;

/** The sizes of `backend`'s bookkeeping that must drop to zero once nothing waits or holds. */
export function backendInternals(
  backend: RedisLockBackend,
): Record<(typeof idleWhenDone)[number], number> {
  const sizes = backend.bookkeeping();
  return Object.fromEntries(
    idleWhenDone.map((name) => [name, sizes[name]]),
  ) as Record<(typeof idleWhenDone)[number], number>;
}

/** Nothing is left behind in `backend`: every size of {@link backendInternals} is zero. */
export function expectNothingLeft(backend: RedisLockBackend): void {
  for (const [name, size] of Object.entries(backendInternals(backend))) {
    expect({ name, size }).toEqual({ name, size: 0 });
  }
}
