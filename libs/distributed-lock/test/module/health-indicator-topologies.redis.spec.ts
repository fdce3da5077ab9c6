/**
 * LockHealthIndicator on a Redlock quorum (up while a majority answers,
 * every node in the details) and on a Redis Cluster (every master probed).
 */
import {
  startRedisCluster,
  type RedisCluster,
} from '../../../../test/support/redis-cluster.js';
import {
  startRedisNodes,
  type RedisNodes,
} from '../../../../test/support/redis-nodes.js';
import { eventually } from '../../../../test/support/lock-fixtures.js';
import { useHealthApps } from './health-fixtures.js';

const open = useHealthApps();

describe('LockHealthIndicator on a quorum of 3', () => {
  let nodes: RedisNodes;
  const addresses = () =>
    nodes.servers.map((server) => `127.0.0.1:${server.port}`);

  beforeEach(async () => {
    nodes = await startRedisNodes(3);
  });

  afterEach(async () => {
    await Promise.all(nodes.servers.map((server) => server.thaw()));
    await nodes.stop();
  });

  it('is up with every node, and still up with one stopped, that node down in the details', async () => {
    const { check, locks } = await open({ nodes: nodes.urls });
    await (await locks.acquire('coupon:1')).release();
    const all = await check();
    expect(all.httpStatus).toBe(200);
    expect(all.lock).toMatchObject({
      status: 'up',
      store: 'quorum',
      quorum: 2,
      scriptsLoaded: true,
      session: { state: 'open', alive: true },
      nodes: addresses().map((address) => ({
        address,
        up: true,
        votes: true,
        scriptsLoaded: true,
      })),
    });
    expect(all.lock.latencyMs).toBeGreaterThanOrEqual(0);

    await nodes.servers[1].stop();
    const one = await check();
    expect(one.httpStatus).toBe(200);
    expect(one.lock.status).toBe('up');
    expect(one.lock.nodes.map((node) => node.up)).toEqual([true, false, true]);
    expect(one.lock.nodes[1]).toMatchObject({
      address: addresses()[1],
      message: expect.any(String),
    });
  });

  it('is down with two of the three stopped', async () => {
    const { check } = await open({ nodes: nodes.urls });
    await nodes.servers[0].stop();
    await nodes.servers[2].stop();
    const { httpStatus, lock, elapsedMs } = await check();
    expect(httpStatus).toBe(503);
    expect(lock).toMatchObject({
      status: 'down',
      reachable: false,
      message: '1 of 3 nodes answer and vote, 2 needed',
    });
    expect(lock.nodes.map((node) => node.up)).toEqual([false, true, false]);
    expect(elapsedMs).toBeLessThan(1000);
  });

  it('counts only nodes whose votes count: two restarted nodes answer, yet sit out', async () => {
    const { check, locks } = await open({ nodes: nodes.urls });
    await (await locks.acquire('coupon:1')).release();
    await nodes.restart(0);
    await nodes.restart(1);
    let muted = await check();
    await eventually(async () => {
      muted = await check();
      return muted.lock.nodes.every((node) => node.up);
    });
    expect(muted.httpStatus).toBe(503);
    expect(muted.lock.nodes.map((node) => node.votes)).toEqual([
      false,
      false,
      true,
    ]);
    expect(muted.lock.message).toBe('1 of 3 nodes answer and vote, 2 needed');
  });

  it('reports a frozen node down within the node timeout, and two of them down', async () => {
    const { check } = await open({ nodes: nodes.urls });
    await nodes.servers[2].freeze();
    const one = await check();
    expect(one.httpStatus).toBe(200);
    expect(one.lock.nodes[2]).toMatchObject({
      up: false,
      message: 'no answer within 200 ms',
    });
    expect(one.elapsedMs).toBeLessThan(600);

    await nodes.servers[0].freeze();
    const two = await check();
    expect(two.httpStatus).toBe(503);
    expect(two.elapsedMs).toBeLessThan(600);
  });
});

describe('LockHealthIndicator on a Redis Cluster', () => {
  let cluster: RedisCluster;

  beforeAll(async () => {
    cluster = await startRedisCluster({ masters: 3 });
  });

  afterAll(async () => {
    await cluster?.stop();
  });

  it('probes every master, then is down when one dies with no replica to take over', async () => {
    const { check, locks } = await open({ cluster: cluster.startupNodes });
    await (await locks.acquire('coupon:1')).release();
    const masters = cluster.masters
      .map((master) => `127.0.0.1:${master.port}`)
      .toSorted();
    const healthy = await check();
    expect(healthy.httpStatus).toBe(200);
    expect(healthy.lock).toMatchObject({
      status: 'up',
      store: 'redis-cluster',
      scriptsLoaded: true,
      nodes: masters.map((address) => ({ address, up: true })),
    });

    // At once: ioredis drops the dead master's connection, yet it still
    // owns its slots until a replica takes over, which none will.
    const dead = await cluster.killMaster(1);
    const down = await check();
    expect(down.httpStatus).toBe(503);
    expect(down.lock).toMatchObject({
      status: 'down',
      reachable: false,
      message: `master 127.0.0.1:${dead.port} down`,
    });
    expect(
      down.lock.nodes.find((node) => node.address.endsWith(`:${dead.port}`)),
    ).toMatchObject({ up: false });
  });
});
