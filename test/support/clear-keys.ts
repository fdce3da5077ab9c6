import type { Redis } from 'ioredis';

/**
 * Deletes every key but the lock services' process sessions
 * (`<prefix>session:{<id>}`): resets lock state between tests while the
 * services stay up. A `FLUSHALL` would also drop their sessions, as a Redis
 * that lost its data would, and their locks would count as free until each
 * service's next renewal noticed.
 */
export async function clearAllButSessions(redis: Redis): Promise<void> {
  const keys = await keysButSessions(redis);
  if (keys.length > 0) await redis.del(...keys);
}

/** Every key but the process sessions: what the locks left in Redis. */
export async function keysButSessions(redis: Redis): Promise<string[]> {
  return (await redis.keys('*')).filter(
    (key) => !/session:\{[^}]+\}$/.test(key),
  );
}
