import { adminCall as call, infoField, waitUntil } from './redis-admin.js';
import type { Node, SlotRange } from './redis-cluster-node.js';
import { SLOTS } from './redis-cluster-slots.js';

/**
 * Reading a test cluster's topology (`CLUSTER NODES`) and waiting until every
 * node agrees on it, after forming, a failover or a slot migration.
 */

/** One node's `CLUSTER NODES` line. */
export interface NodeView {
  id: string;
  flags: string[];
  masterId?: string;
  slots: SlotRange[];
}

/**
 * Waits until every live node has the same view of roles and slots, every
 * slot is served by a live master, live replicas are in sync and every live
 * node says `cluster_state:ok`; then adopts that view.
 */
export async function waitUntilConverged(
  nodes: readonly Node[],
  timeoutMs: number,
): Promise<void> {
  let agreed: NodeView[] = [];
  await waitUntil('the cluster to converge', timeoutMs, async () => {
    const live = nodes.filter((node) => node.alive);
    const views = await Promise.all(live.map((node) => readView(node.port)));
    const signatures = new Set(views.map(signature));
    if (signatures.size !== 1) return false;
    const view = views[0];
    const liveIds = new Set(live.map((node) => node.id));
    let served = 0;
    for (const entry of view) {
      const isLive = liveIds.has(entry.id);
      if (isLive && entry.flags.some((f) => f === 'fail' || f === 'fail?')) {
        return false;
      }
      if (isLive && entry.flags.includes('master')) {
        for (const [a, b] of entry.slots) served += b - a + 1;
      } else if (entry.slots.length > 0) {
        return false;
      }
    }
    if (served !== SLOTS) return false;
    const infos = await Promise.all(
      live.map((node) => call(node.port, 'CLUSTER', 'INFO')),
    );
    if (
      !infos.every((info) => infoField(String(info), 'cluster_state') === 'ok')
    ) {
      return false;
    }
    const replicas = view.filter(
      (entry) => liveIds.has(entry.id) && entry.flags.includes('slave'),
    );
    for (const replica of replicas) {
      const port = nodes.find((node) => node.id === replica.id)!.port;
      const info = String(await call(port, 'INFO', 'replication'));
      if (infoField(info, 'master_link_status') !== 'up') return false;
    }
    agreed = view;
    return true;
  });
  for (const node of nodes) {
    const entry = agreed.find(({ id }) => id === node.id);
    if (!entry) continue;
    node.role = entry.flags.includes('slave') ? 'replica' : 'master';
    node.slots = entry.slots;
  }
}

/** The node's `CLUSTER NODES`, one entry per node it knows. */
export async function readView(port: number): Promise<NodeView[]> {
  const text = String(await call(port, 'CLUSTER', 'NODES'));
  return text
    .trim()
    .split('\n')
    .map((line) => {
      const [id, , flags, master, , , , , ...slotFields] = line.split(' ');
      return {
        id,
        flags: flags.split(','),
        masterId: master === '-' ? undefined : master,
        slots: slotFields
          .filter((field) => !field.startsWith('['))
          .map((field) => {
            const [a, b = a] = field.split('-').map(Number);
            return [a, b] as const;
          }),
      };
    });
}

/** What must be the same in every node's view: roles, masters and slots. */
function signature(view: NodeView[]): string {
  return view
    .map(({ id, flags, masterId, slots }) => {
      const role = flags.includes('slave') ? 'replica' : 'master';
      return `${id} ${role} ${masterId ?? '-'} ${slots.join(',')}`;
    })
    .toSorted()
    .join('\n');
}
