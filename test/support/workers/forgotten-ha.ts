/**
 * Starts a cluster, a sentinel group or independent nodes, prints the pids of
 * their redis-server processes and exits without stopping them: the exit hook
 * of redis-server.ts must still kill every one.
 *
 * Usage: node --import @swc-node/register/esm-register forgotten-ha.ts cluster|sentinel|nodes
 */
import { startRedisCluster } from '../redis-cluster.js';
import { startRedisNodes } from '../redis-nodes.js';
import { startSentinelGroup } from '../redis-sentinel.js';

const kind = process.argv[2];
let pids: (number | undefined)[];
if (kind === 'cluster') {
  const cluster = await startRedisCluster({ masters: 1, replicasPerMaster: 1 });
  pids = cluster.nodes.map((node) => node.pid);
} else if (kind === 'sentinel') {
  const group = await startSentinelGroup({ sentinels: 3 });
  pids = [group.master, group.replica, ...group.sentinelServers].map((server) =>
    server.pid(),
  );
} else if (kind === 'nodes') {
  const nodes = await startRedisNodes(2);
  pids = nodes.servers.map((server) => server.pid());
} else {
  throw new Error(`Unknown kind ${kind}: use cluster, sentinel or nodes`);
}
process.stdout.write(`${JSON.stringify({ pids })}\n`);
// The sentinel group's replication proxy holds sockets open: leave anyway.
process.exit(0);
