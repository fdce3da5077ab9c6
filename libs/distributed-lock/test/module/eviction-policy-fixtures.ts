import { Redis } from 'ioredis';
import {
  startRedisServer,
  type RedisServerHandle,
} from '../../../../test/support/redis-server.js';

/**
 * Redis servers under the eviction policies the eviction-policy specs need,
 * and clients of them closed after each test.
 */
export interface PolicyServers {
  /** allkeys-lru, with DEBUG SLEEP to play a slow server. */
  allkeys: RedisServerHandle;
  noeviction: RedisServerHandle;
  /** Each test sets the policy it needs. */
  switchable: RedisServerHandle;
  /**
   * allkeys-lru with CONFIG disabled, as on many managed services, and a user
   * who may not run INFO either, so cannot read the policy at all.
   */
  noConfig: RedisServerHandle;
  /** The URL of that user on `noConfig`. */
  restrictedUrl: string;
}

/** Starts the {@link PolicyServers}; the caller stops them. */
export async function startPolicyServers(): Promise<PolicyServers> {
  const [allkeys, noeviction, switchable, noConfig] = await Promise.all([
    startRedisServer({
      extraArgs: [
        '--maxmemory-policy',
        'allkeys-lru',
        '--enable-debug-command',
        'local',
      ],
    }),
    startRedisServer({ extraArgs: ['--maxmemory-policy', 'noeviction'] }),
    startRedisServer(),
    startRedisServer({
      extraArgs: [
        '--maxmemory-policy',
        'allkeys-lru',
        '--rename-command',
        'CONFIG',
        '',
        '--user',
        'restricted',
        'on',
        '>secret',
        '~*',
        '&*',
        '+@all',
        '-info',
      ],
    }),
  ]);
  const restrictedUrl = `redis://restricted:secret@${noConfig.host}:${noConfig.port}`;
  return { allkeys, noeviction, switchable, noConfig, restrictedUrl };
}

const clients = new Set<Redis>();

/** A client closed by {@link disconnectClients} after the test. */
export function connect(
  url: string,
  options: { lazyConnect?: boolean } = {},
): Redis {
  const client = new Redis(url, {
    ...options,
    // ioredis's ready check runs INFO, which complains for the restricted user.
    enableReadyCheck: false,
  });
  client.on('error', () => undefined);
  clients.add(client);
  return client;
}

export async function ready(client: Redis): Promise<Redis> {
  await client.ping();
  return client;
}

/** Disconnects every client {@link connect} opened. */
export function disconnectClients(): void {
  for (const client of clients) client.disconnect();
  clients.clear();
}
