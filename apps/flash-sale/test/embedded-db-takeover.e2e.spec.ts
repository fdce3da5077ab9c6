import { spawn, type ChildProcess } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { DATA_DIR_LOCK_FILE } from '../src/database/embedded-db-lock.js';
import { buyerTag } from '../src/web/buyer-tag.js';
import {
  HOSTS_LINE,
  purchase,
  SILENT_HOST_LINE,
  startEmbeddedCluster,
  TOOK_OVER_LINE,
  untilHealthy,
  type EmbeddedCluster,
} from './support/embedded-cluster.js';
import { adminAuth, couponBody } from './support/harness.js';

/** Kill of the host to both survivors healthy again: PGlite reopens in 1-3 s. */
const TAKEOVER_BOUND_MS = 10_000;

/** The tags the orders route shows for these users, sorted. */
const tagsOf = (users: string[]) => users.map(buyerTag).toSorted();

/**
 * Three instances as processes on one embedded database: what happens when
 * the instance hosting it freezes, is killed, or dies leaving a directory
 * that cannot be opened.
 */
describe('the embedded database when its host goes away (3 instances as processes)', () => {
  let cluster: EmbeddedCluster;
  let couponId: number;
  let foreign: ChildProcess | undefined;
  const lockFile = () => path.join(cluster.dataDir, DATA_DIR_LOCK_FILE);
  const lockOwner = async () => Number(await readFile(lockFile(), 'utf8'));
  /** The coupon's buyers as instance `index` lists them (as tags: the route never shows ids). */
  const orderBuyers = async (index: number) => {
    const response = await cluster.request(
      index,
      `/api/coupons/${couponId}/orders`,
    );
    expect(response.status).toBe(200);
    const orders = (await response.json()) as { buyer: string }[];
    return orders.map((order) => order.buyer).toSorted();
  };

  beforeAll(async () => {
    cluster = await startEmbeddedCluster(3);
    const created = await cluster.request(1, '/api/coupons', {
      method: 'POST',
      headers: {
        'Content-Type': 'application/json',
        [adminAuth()[0]]: adminAuth()[1],
      },
      body: JSON.stringify(couponBody({ stock: 10 })),
    });
    expect(created.status).toBe(201);
    couponId = ((await created.json()) as { id: number }).id;
  }, 90_000);

  afterAll(async () => {
    foreign?.kill('SIGKILL');
    await cluster?.stop();
  });

  it('starts with the first instance as the only host', async () => {
    expect(
      cluster.linesMatching(HOSTS_LINE).map((line) => line.instance),
    ).toEqual([0]);
    expect(await lockOwner()).toBe(cluster.instances[0].pid);
    expect(await purchase(cluster, 1, couponId, 'before-1')).toBe(201);
    expect(await purchase(cluster, 2, couponId, 'before-2')).toBe(201);
    expect(await purchase(cluster, 0, couponId, 'before-3')).toBe(201);
  });

  it('leaves a frozen host alone: it keeps the port, nobody opens the data directory, and it serves again when it thaws', async () => {
    const since = Date.now();
    await cluster.instances[0].pause();
    try {
      // The survivors' queries hang on the frozen host; their connections
      // time out, so both check whether the host is gone, and see it is not.
      const deadline = Date.now() + 10_000;
      const checked = () =>
        new Set(
          cluster.lines
            .filter((l) => l.at >= since && SILENT_HOST_LINE.test(l.text))
            .map((l) => l.instance),
        );
      const opened = () =>
        cluster.lines.filter((l) => l.at >= since && HOSTS_LINE.test(l.text));
      while (checked().size < 2 && opened().length === 0) {
        expect(Date.now()).toBeLessThan(deadline);
        const statuses = await Promise.all(
          [1, 2].map((index) =>
            cluster
              .request(index, '/health')
              .then((response) => response.status)
              .catch(() => 0),
          ),
        );
        expect(statuses).not.toContain(200);
      }
      await sleep(500); // what a wrong takeover would do next, it has done by now
      expect(opened()).toEqual([]);
      expect(await lockOwner()).toBe(cluster.instances[0].pid);
    } finally {
      cluster.instances[0].resume();
    }
    await Promise.all(
      [1, 2].map((index) => untilHealthy(cluster, index, 15_000)),
    );
  });

  it('lets one survivor take over within seconds when the host is SIGKILLed, with every order kept', async () => {
    const since = Date.now();
    await cluster.instances[0].kill();
    const exitedAt = Date.now();
    const recovery = await Promise.all(
      [1, 2].map((index) => untilHealthy(cluster, index, 20_000)),
    );
    const recoveredAfterMs = Date.now() - since;
    console.log(
      `Host SIGKILLed: both survivors healthy again after ${recoveredAfterMs} ms (${recovery.join(', ')} ms)`,
    );
    expect(recoveredAfterMs).toBeLessThanOrEqual(TAKEOVER_BOUND_MS);

    // Exactly one survivor opened the data directory, after the host was gone.
    const opened = cluster.lines.filter(
      (l) => l.at >= since && HOSTS_LINE.test(l.text),
    );
    expect(opened).toHaveLength(1);
    expect(opened[0].at).toBeGreaterThanOrEqual(exitedAt);
    const tookOver = cluster.linesMatching(TOOK_OVER_LINE);
    expect(tookOver.map((line) => line.instance)).toEqual([opened[0].instance]);
    expect(await lockOwner()).toBe(cluster.instances[opened[0].instance].pid);

    const before = ['before-1', 'before-2', 'before-3'];
    expect(await orderBuyers(1)).toEqual(tagsOf(before));
    expect(await orderBuyers(2)).toEqual(tagsOf(before));
    expect(await purchase(cluster, 1, couponId, 'after-1')).toBe(201);
    expect(await purchase(cluster, 2, couponId, 'after-2')).toBe(201);
    expect(await purchase(cluster, 1, couponId, 'after-2')).toBe(409);
    expect(await orderBuyers(2)).toEqual(
      tagsOf([...before, 'after-1', 'after-2']),
    );
  });

  it('makes the last survivor exit, saying what to do, when the data directory is held by a live process', async () => {
    const newHost = cluster.linesMatching(TOOK_OVER_LINE)[0]?.instance;
    expect(newHost).toBeDefined();
    const survivor = newHost === 1 ? 2 : 1;
    // Another live process claims the directory, then the host dies.
    foreign = spawn('sleep', ['60'], { stdio: 'ignore' });
    await writeFile(lockFile(), `${foreign.pid}\n`);
    const since = Date.now();
    await cluster.instances[newHost!].kill();

    const deadline = Date.now() + 15_000;
    while (cluster.instances[survivor].pid !== undefined) {
      if (Date.now() > deadline) {
        throw new Error(
          `instance ${survivor + 1} still runs:\n${cluster.instances[survivor].logTail()}`,
        );
      }
      await cluster
        .request(survivor, '/health')
        .then((response) => response.body?.cancel())
        .catch(() => undefined);
      await sleep(100);
    }
    const failure = await cluster.waitForLine(
      /Cannot take over the embedded database, exiting/,
      since,
      1_000,
    );
    expect(failure.instance).toBe(survivor);
    expect(failure.text).toContain(`in use by process ${foreign.pid}`);
    expect(failure.text).toContain('EMBEDDED_DB_DIR');
    // The directory is still the foreign process's, and the port is free again.
    expect(await lockOwner()).toBe(foreign.pid);
    expect(await connectError(cluster.dbPort)).toBe('ECONNREFUSED');
  });
});

function connectError(port: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve('connected');
    });
    socket.once('error', (error: NodeJS.ErrnoException) =>
      resolve(error.code ?? error.message),
    );
  });
}
