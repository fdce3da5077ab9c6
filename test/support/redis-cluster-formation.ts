import { adminCall as call, waitUntil } from './redis-admin.js';
import { readView, waitUntilConverged } from './redis-cluster-convergence.js';
import { HOST, type Node } from './redis-cluster-node.js';
import { SLOTS } from './redis-cluster-slots.js';

/**
 * Forms a test cluster from started nodes by hand rather than with
 * `redis-cli --cluster create` (which sleeps a second per step): config
 * epochs, `CLUSTER ADDSLOTSRANGE`, a full mesh of `CLUSTER MEET`,
 * `CLUSTER REPLICATE`, then waiting until every node reports the same slot
 * map, `cluster_state:ok` and synced replicas.
 */

/** How long forming the cluster, or settling a slot migration, may take. */
export const START_TIMEOUT_MS = 15_000;

/**
 * Gives the first `masters` nodes even ranges of slots, in order (like
 * redis-cli: 3 masters get 0-5460, 5461-10922, 10923-16383), makes every node
 * meet every other, makes the rest replicas of their shard's master and waits
 * until the cluster has converged.
 */
export async function formCluster(
  nodes: readonly Node[],
  masters: number,
): Promise<void> {
  const primaries = nodes.slice(0, masters);
  let first = 0;
  await Promise.all(
    primaries.map((node, i) => {
      const last =
        i === masters - 1
          ? SLOTS - 1
          : Math.max(first, Math.round(((i + 1) * SLOTS) / masters - 1));
      const range = [first, last] as const;
      first = last + 1;
      return (async () => {
        await call(node.port, 'CLUSTER', 'SET-CONFIG-EPOCH', i + 1);
        await call(node.port, 'CLUSTER', 'ADDSLOTSRANGE', ...range);
      })();
    }),
  );
  await Promise.all(
    nodes.flatMap((node, i) =>
      nodes
        .slice(i + 1)
        .map((other) =>
          call(node.port, 'CLUSTER', 'MEET', HOST, other.port, other.busPort),
        ),
    ),
  );
  await waitUntil('all nodes to meet', START_TIMEOUT_MS, async () => {
    const views = await Promise.all(nodes.map((n) => readView(n.port)));
    return views.every(
      (view) =>
        view.length === nodes.length &&
        view.every(({ flags }) => !flags.includes('handshake')),
    );
  });
  await Promise.all(
    nodes
      .filter((node) => node.role === 'replica')
      .map((node) =>
        call(node.port, 'CLUSTER', 'REPLICATE', primaries[node.shard].id),
      ),
  );
  await waitUntilConverged(nodes, START_TIMEOUT_MS);
}
