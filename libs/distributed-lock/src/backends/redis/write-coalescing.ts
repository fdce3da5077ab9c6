import type { Cluster, Redis } from 'ioredis';

type SendCommand = Redis['sendCommand'];

/**
 * Commands per socket write in a busy turn. Smaller batches overlap Redis's
 * work with Node's sooner but cost a system call each; 12 did best among 8,
 * 12, 16 and 24 in the benchmark's 64 concurrent loops (bench B).
 */
export const batchSize = 12;

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
 * At most {@link batchSize} commands wait in the cork: a turn that issues
 * more writes each full batch at once and corks again for the next. Redis
 * then works through one batch while Node is still building the next, where
 * one write at the turn's end would leave each side idle while the other
 * works. In the benchmark's 64 concurrent loops (bench B) this took
 * `LockService` from 2.11x to 2.62x the raw client's cycles/s, and a fenced
 * acquisition, whose script keeps Redis busy longer, from 1.39x to 2.41x.
 *
 * Only for connections the lock module opened itself: a client the
 * application passes in is left as it is. A cluster's node connections are
 * coalesced as the cluster opens them.
 *
 * With `firstAtOnce`, a turn's first command is written at once, and only the
 * ones after it in the same turn wait for its end, unless the turn before
 * carried several (then all wait, as without it): for a quorum node's
 * connection, which a lock round gives one command, that the cork would only
 * hold back until the turn's promise callbacks are done.
 *
 * @returns a function that restores the plain one-write-per-command sending
 */
export function coalesceWrites(
  client: Redis | Cluster,
  { firstAtOnce = false }: { readonly firstAtOnce?: boolean } = {},
): () => void {
  if ('nodes' in client && typeof client.nodes === 'function') {
    const cluster = client as Cluster;
    const undo = new Map<Redis, () => void>();
    const onNode = (node: Redis) => {
      if (!undo.has(node))
        undo.set(node, coalesceNodeWrites(node, firstAtOnce));
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
  return coalesceNodeWrites(client as Redis, firstAtOnce);
}

function coalesceNodeWrites(client: Redis, firstAtOnce: boolean): () => void {
  const original = Object.hasOwn(client, 'sendCommand')
    ? client.sendCommand
    : undefined;
  const send: SendCommand = client.sendCommand.bind(client);
  // The socket corked in this turn, if any.
  let corked: Redis['stream'] | undefined;
  // Commands written to `corked` since it was last flushed.
  let batched = 0;
  const uncork = () => {
    const stream = corked;
    corked = undefined;
    stream?.uncork();
  };
  // firstAtOnce: commands sent in this turn and the last one, and the
  // socket this turn's first command was written to at once.
  let sent = 0;
  let sentBefore = 0;
  let sentFirst: Redis['stream'] | undefined;
  const endTurn = () => {
    sentBefore = sent;
    sent = 0;
    sentFirst = undefined;
    uncork();
  };
  client.sendCommand = (command, stream) => {
    // ioredis writes a command to the current socket when it is writable
    // and no other destination (a pipeline) is named; otherwise it queues
    // it, and there is nothing to cork.
    const socket = client.stream as Redis['stream'] | undefined;
    if (!firstAtOnce) {
      if (stream === undefined && socket && socket !== corked) {
        if (socket.writable && client.status === 'ready') {
          uncork();
          corked = socket;
          batched = 0;
          socket.cork();
          process.nextTick(uncork);
        }
      }
      if (
        stream === undefined &&
        corked !== undefined &&
        socket === corked &&
        ++batched === batchSize
      ) {
        const reply = send(command, stream);
        // Flush the full batch; the turn's next command finds it corked.
        batched = 0;
        socket.uncork();
        socket.cork();
        return reply;
      }
    } else if (
      stream === undefined &&
      socket?.writable &&
      client.status === 'ready'
    ) {
      if (sent++ === 0) process.nextTick(endTurn);
      // After a turn of one command, this turn's first is written now.
      if (socket !== corked && (sentBefore > 1 || sentFirst !== undefined)) {
        uncork();
        corked = socket;
        socket.cork();
      } else if (socket !== corked) {
        sentFirst = socket;
      }
    }
    return send(command, stream);
  };
  return () => {
    endTurn();
    if (original) client.sendCommand = original;
    else delete (client as Partial<Redis>).sendCommand;
  };
}
