import type { Cluster, Redis } from 'ioredis';

type SendCommand = Redis['sendCommand'];

/**
 * Makes `client` send the commands issued in one turn of the event loop in
 * one socket write: the first command of a turn corks the connection's
 * socket and the turn's end (`process.nextTick`, which runs once the
 * promise callbacks of the turn are done) uncorks it, so Node hands the
 * kernel every command of the turn in one `writev`.
 *
 * Why: with many concurrent callers, a write per command is most of the
 * CPU a lock cycle costs in Node (a system call each), and Redis reads them
 * one by one as well. Unlike ioredis's `enableAutoPipelining`, nothing waits:
 * a batch is written while the previous one's replies are still coming, no
 * pipeline object is built, and a command alone in its turn leaves at the
 * same moment it would have.
 *
 * Only for connections the lock module opened itself: a client the
 * application passes in is left as it is. A cluster's node connections are
 * coalesced as the cluster opens them.
 *
 * @returns a function that restores the plain one-write-per-command sending
 */
export function coalesceWrites(client: Redis | Cluster): () => void {
  if ('nodes' in client && typeof client.nodes === 'function') {
    const cluster = client as Cluster;
    const undo = new Map<Redis, () => void>();
    const onNode = (node: Redis) => {
      if (!undo.has(node)) undo.set(node, coalesceNodeWrites(node));
    };
    const onNodeGone = (node: Redis) => {
      undo.get(node)?.();
      undo.delete(node);
    };
    for (const node of cluster.nodes()) onNode(node);
    cluster.on('+node', onNode);
    cluster.on('-node', onNodeGone);
    return () => {
      cluster.off('+node', onNode);
      cluster.off('-node', onNodeGone);
      for (const restore of undo.values()) restore();
      undo.clear();
    };
  }
  return coalesceNodeWrites(client as Redis);
}

function coalesceNodeWrites(client: Redis): () => void {
  const original = Object.hasOwn(client, 'sendCommand')
    ? client.sendCommand
    : undefined;
  const send: SendCommand = client.sendCommand.bind(client);
  // The socket corked in this turn, if any.
  let corked: Redis['stream'] | undefined;
  const uncork = () => {
    const stream = corked;
    corked = undefined;
    stream?.uncork();
  };
  client.sendCommand = (command, stream) => {
    // ioredis writes a command to the current socket when it is writable
    // and no other destination (a pipeline) is named; otherwise it queues
    // it, and there is nothing to cork.
    const socket = client.stream as Redis['stream'] | undefined;
    if (stream === undefined && socket && socket !== corked) {
      if (socket.writable && client.status === 'ready') {
        uncork();
        corked = socket;
        socket.cork();
        process.nextTick(uncork);
      }
    }
    return send(command, stream);
  };
  return () => {
    uncork();
    if (original) client.sendCommand = original;
    else delete (client as Partial<Redis>).sendCommand;
  };
}
