/**
 * Clients of a throwaway cluster for the redis-cluster specs, each
 * disconnected by {@link disconnectClients} after the test.
 */
import { Cluster, Redis } from 'ioredis';

import type { RedisCluster } from './redis-cluster.js';
import { hashTagForSlot } from './redis-cluster-slots.js';

const clients: (Cluster | Redis)[] = [];

/** A Cluster client of `cluster`, closed after the test. */
export function connect(cluster: RedisCluster, options = {}): Cluster {
  const client = new Cluster(cluster.startupNodes, options);
  client.on('error', () => undefined);
  clients.push(client);
  return client;
}

/** A client of the one node on `port`, closed after the test. */
export function direct(port: number): Redis {
  const client = new Redis({ host: '127.0.0.1', port });
  client.on('error', () => undefined);
  clients.push(client);
  return client;
}

/** A key that lands in the first slot of master `index`, with a suffix. */
export function keyOnMaster(
  cluster: RedisCluster,
  index: number,
  suffix = '',
): string {
  return `k:{${hashTagForSlot(cluster.masters[index].slots[0][0])}}${suffix}`;
}

/** Disconnects every client {@link connect} and {@link direct} opened. */
export function disconnectClients(): void {
  for (const client of clients.splice(0)) client.disconnect();
}
