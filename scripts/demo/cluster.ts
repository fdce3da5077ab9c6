import { randomBytes } from 'node:crypto';
import {
  openDatabase,
  openRedis,
  type Backend,
} from '../../apps/flash-sale/loadtest/backends.js';
import { AppInstance } from '../../apps/flash-sale/loadtest/instances.js';
import { configuredAdminToken } from '../../apps/flash-sale/src/web/admin-token.guard.js';
import { DEMO_MODE_ENV } from '../../apps/flash-sale/src/web/demo-mode.js';

/** The demo's app instances and the Redis and database they share. */
export interface DemoCluster {
  readonly instances: AppInstance[];
  /** `http://127.0.0.1:<port>` of each instance. */
  readonly bases: string[];
  readonly redisUrl: string;
  readonly databaseUrl: string;
  readonly adminToken: string;
  /** Stops the instances (SIGTERM), then the backends the demo started. */
  close(): Promise<void>;
}

/**
 * Starts `count` app instances as processes on ports `firstPort`… (demo mode:
 * the page's Kill buttons work), sharing REDIS_URL or a private
 * redis-server, and DATABASE_URL or the embedded database server, and waits
 * until each answers /health.
 */
export async function startDemoCluster(
  count: number,
  firstPort: number,
  onLine: (index: number, line: string) => void,
): Promise<DemoCluster> {
  const backends: Backend[] = [];
  const closeBackends = () =>
    Promise.all(backends.splice(0).map((backend) => backend.close()));
  try {
    const [redis, database] = await Promise.all([
      openRedis(process.env.REDIS_URL).then((b) => (backends.push(b), b)),
      openDatabase(process.env.DATABASE_URL, {
        fromBuild: false,
        maxConnections: 100,
      }).then((b) => (backends.push(b), b)),
    ]);
    const adminToken =
      configuredAdminToken() ?? randomBytes(24).toString('hex');
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      REDIS_URL: redis.url,
      DATABASE_URL: database.url,
      LOCAL_REDIS: '0',
      ADMIN_TOKEN: adminToken,
      [DEMO_MODE_ENV]: '1',
      NO_COLOR: '1',
    };
    const instances = Array.from(
      { length: count },
      (_, index) =>
        new AppInstance({
          index,
          port: firstPort + index,
          env,
          fromBuild: false,
          startTimeoutMs: 60_000,
          onLine,
        }),
    );
    const stopInstances = () =>
      Promise.all(instances.map((instance) => instance.stop(5_000)));
    try {
      await Promise.all(instances.map((instance) => instance.start()));
    } catch (error) {
      await stopInstances();
      throw error;
    }
    return {
      instances,
      bases: instances.map((i) => `http://127.0.0.1:${i.port}`),
      redisUrl: redis.url,
      databaseUrl: database.url,
      adminToken,
      close: async () => {
        await stopInstances();
        await closeBackends();
      },
    };
  } catch (error) {
    await closeBackends();
    throw error;
  }
}
