import { Redis } from 'ioredis';

import { eventually, sleep } from './lock-fixtures.js';
import { isProcessGone } from './process-state.js';
import { runTs } from './processes.js';
import { startSentinelGroup, type SentinelGroup } from './redis-sentinel.js';

const clients: Redis[] = [];
let group: SentinelGroup | undefined;

function direct(port: number): Redis {
  const client = new Redis({
    host: '127.0.0.1',
    port,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  client.on('error', () => undefined);
  clients.push(client);
  return client;
}

/** A client that finds the master through the Sentinels, as an app would. */
function viaSentinels({ sentinels, name }: SentinelGroup): Redis {
  const client = new Redis({ sentinels, name, retryStrategy: () => 50 });
  client.on('error', () => undefined);
  clients.push(client);
  return client;
}

/** The `failover-timeout` every Sentinel has for the master. */
async function failoverTimeouts({ sentinels, name }: SentinelGroup) {
  return Promise.all(
    sentinels.map(async ({ port }) => {
      const state = (await direct(port).call(
        'SENTINEL',
        'MASTER',
        name,
      )) as string[];
      return Number(state[state.indexOf('failover-timeout') + 1]);
    }),
  );
}

async function start(): Promise<SentinelGroup> {
  group = await startSentinelGroup({ sentinels: 3 });
  return group;
}

afterEach(async () => {
  for (const client of clients.splice(0)) client.disconnect();
  await group?.stop();
  group = undefined;
});

it('starts a master, a replica and three Sentinels that know each other', async () => {
  const started = performance.now();
  const { master, replica, sentinels, sentinelServers, name } = await start();
  expect(performance.now() - started).toBeLessThan(5_000);

  expect(name).toBe('mymaster');
  expect(sentinels).toHaveLength(3);
  const ports = new Set([
    master.port,
    replica.port,
    ...sentinels.map((s) => s.port),
  ]);
  expect(ports.size).toBe(5);
  expect(ports.has(6379)).toBe(false);
  expect(ports.has(26_379)).toBe(false);
  expect(
    sentinelServers.map(({ port }) => ({ host: '127.0.0.1', port })),
  ).toEqual(sentinels);
  for (const { port } of sentinels) {
    const sentinel = direct(port);
    const masterAddress = await sentinel.call(
      'SENTINEL',
      'GET-MASTER-ADDR-BY-NAME',
      name,
    );
    expect(masterAddress).toEqual(['127.0.0.1', String(master.port)]);
    expect(await sentinel.call('SENTINEL', 'CKQUORUM', name)).toMatch(/^OK/);
    expect(await sentinel.call('SENTINEL', 'REPLICAS', name)).toHaveLength(1);
    expect(await sentinel.call('SENTINEL', 'SENTINELS', name)).toHaveLength(2);
  }

  const client = viaSentinels(group!);
  await client.set('greeting', 'hello');
  expect(await client.call('ROLE')).toContain('master');
  await eventually(
    async () => (await direct(replica.port).get('greeting')) === 'hello',
  );
});

it('fails over to the replica when the master is killed', async () => {
  const { master, replica } = await start();
  const client = viaSentinels(group!);
  await client.set('kept', 'yes');
  expect(await client.wait(1, 1_000)).toBe(1);

  const started = performance.now();
  await group!.killMaster();
  expect(master.pid()).toBeUndefined();
  const address = await group!.waitForFailover();
  expect(performance.now() - started).toBeLessThan(15_000);

  expect(address).toEqual({ host: '127.0.0.1', port: replica.port });
  expect(group!.master).toBe(replica);
  expect(group!.replica).toBe(master);
  expect(await direct(replica.port).call('ROLE')).toContain('master');
  await eventually(async () => (await client.get('kept')) === 'yes', 10_000);
  await client.set('after', 'failover');
  expect(await direct(replica.port).get('after')).toBe('failover');
});

it('pauseReplication() leaves the replica behind, so a failover loses the writes', async () => {
  const { master, replica } = await start();
  const writer = direct(master.port);
  await writer.set('before', 'replicated');
  await group!.pauseReplication();
  await writer.set('during', 'lost');
  expect(await writer.get('during')).toBe('lost');
  await sleep(300);
  expect(await direct(replica.port).get('during')).toBeNull();
  expect(await direct(replica.port).info('replication')).toContain(
    'master_link_status:up',
  );

  await group!.killMaster();
  await group!.waitForFailover();
  const promoted = direct(group!.master.port);
  expect(group!.master).toBe(replica);
  expect(await promoted.get('before')).toBe('replicated');
  expect(await promoted.get('during')).toBeNull();
  expect(await failoverTimeouts(group!)).toEqual([5_000, 5_000, 5_000]);
});

it('resumeReplication() delivers the held writes', async () => {
  const { master, replica } = await start();
  expect(await failoverTimeouts(group!)).toEqual([5_000, 5_000, 5_000]);
  await group!.pauseReplication();
  await group!.pauseReplication(); // idempotent
  // Else the Sentinels would point the replica back at the master.
  expect(await failoverTimeouts(group!)).toEqual([
    3_600_000, 3_600_000, 3_600_000,
  ]);
  await direct(master.port).set('held', 'then delivered');
  await sleep(200);
  expect(await direct(replica.port).get('held')).toBeNull();

  await group!.resumeReplication();
  expect(await direct(replica.port).get('held')).toBe('then delivered');
  expect(await direct(replica.port).info('replication')).toContain(
    `master_port:${master.port}`,
  );
  expect(await failoverTimeouts(group!)).toEqual([5_000, 5_000, 5_000]);
  await group!.resumeReplication(); // not paused: nothing to do
});

it('kills the processes of a group left running when the process exits', async () => {
  const stdout = await runTs('test/support/workers/forgotten-ha.ts', [
    'sentinel',
  ]);
  const { pids } = JSON.parse(stdout) as { pids: number[] };
  expect(pids).toHaveLength(5);
  for (const pid of pids) await eventually(() => isProcessGone(pid), 2_000);
});
