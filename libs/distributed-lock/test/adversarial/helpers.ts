/**
 * Shared set-up of the adversarial specs of the Redis lock backend and
 * LockService: races between hand-offs, give-ups, releases and shutdown, late
 * or stray wake-up messages, client options that fight the backend, killed
 * processes, Redis restarts, and stress runs that would show two holders
 * inside at once.
 *
 * Some tests push a hand-off message into a process's wake list by hand. That
 * stands for a message that arrives late or twice (a slow or reconnecting
 * blocking connection, a script re-sent after a reconnect, a duplicate queue
 * entry), which is hard to time from outside.
 */
import type { Redis } from 'ioredis';
import type {
  OpenedLocks,
  OpenLocksOptions,
} from '../../../../test/support/lock-clients.js';
import { useRedisFixture } from '../../../../test/support/redis-fixture.js';
import type { RedisServerHandle } from '../../../../test/support/redis-server.js';
import { openMonitor } from '../../../../test/support/redis-monitor.js';

export interface AdversarialFixture {
  /** The spec file's `redis-server`. */
  readonly server: RedisServerHandle;
  /** A plain client of the server, for looking at keys. */
  readonly redis: Redis;
  /** A LockService with its own connection (and so its own wake list), closed after each test. */
  open(options?: OpenLocksOptions & { url?: string }): OpenedLocks;
  /** How many entries `name`'s queue in Redis holds. */
  queueLength(name: string): Promise<number>;
  /** Everything is released: of `name`'s keys only its fencing counter is left. */
  expectOnlyFenceLeft(name: string): Promise<void>;
  /**
   * Records the commands clients send from now on, lower-cased, until `stop()`.
   * Commands run inside scripts are reported by MONITOR too; they are left out.
   */
  recordClientCommands(): Promise<{
    readonly sent: string[];
    readonly stop: () => void;
  }>;
  /** The wake list named in the first queue entry of `name`, and that entry's token. */
  firstQueued(name: string): Promise<{ token: string; wakeList: string }>;
}

/**
 * Registers the hooks of the calling spec file: one `redis-server` for the
 * file; after each test, mocks restored, lock services closed and the data
 * flushed.
 */
export function useAdversarialFixture(): AdversarialFixture {
  const fixture = useRedisFixture();
  afterEach(() => {
    vi.restoreAllMocks();
  });

  return {
    get server() {
      return fixture.server;
    },
    get redis() {
      return fixture.redis;
    },
    open: (options) => fixture.open(options),
    queueLength: (name) => fixture.redis.llen(`lock:{${name}}:queue`),
    async expectOnlyFenceLeft(name) {
      expect(await fixture.redis.keys(`lock:{${name}}*`)).toEqual([
        `lock:{${name}}:fence`,
      ]);
    },
    async recordClientCommands() {
      const monitor = await openMonitor(fixture.redis);
      const sent: string[] = [];
      monitor.on('monitor', (_time: string, args: string[], source: string) => {
        if (!source.includes('lua')) sent.push(args.join(' ').toLowerCase());
      });
      return { sent, stop: () => monitor.disconnect() };
    },
    async firstQueued(name) {
      const entry = await fixture.redis.lindex(`lock:{${name}}:queue`, 0);
      if (!entry) throw new Error(`nobody queues for ${name}`);
      const [, , token, ...wakeList] = entry.split('|');
      return { token, wakeList: wakeList.join('|') };
    },
  };
}
