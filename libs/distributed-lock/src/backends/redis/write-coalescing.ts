import type { Cluster, Redis } from 'ioredis';
import { ownQueueEntry } from './command-queue-entries.js';

type SendCommand = Redis['sendCommand'];

/**
 * Commands per socket write in a busy turn. Smaller batches overlap Redis's
 * work with Node's sooner but cost a system call each; 12 did best among 8,
 * 12, 16 and 24 in the benchmark's 64 concurrent loops (bench B).
 */
export const batchSize = 12;

/**
 * Makes `client` send the commands issued in one turn of the event loop in
 * one socket write, by Nagle's rule: a command on a connection with nothing
 * in flight is written at once, since Redis is idle and every microsecond it
 * waits is latency. A command issued while others await their replies
 * corks the connection's socket, and the turn's end (`process.nextTick`,
 * which runs once the promise callbacks of the turn are done) uncorks it, so
 * Node hands the kernel the rest of the turn's commands in one `writev`.
 *
 * Why: with many concurrent callers, a write per command is most of the
 * CPU a lock cycle costs in Node (a system call each), and Redis reads them
 * one by one as well. Unlike ioredis's `enableAutoPipelining`, nothing waits
 * for replies: a batch is written while the previous one's replies are
 * still coming, no pipeline object is built, and a command alone on an idle
 * connection leaves as it would without coalescing. The cork is not free
 * (a buffered write, a `writev` and a tick, about 3 µs a command on the
 * benchmark's machine), and a sequential caller gains nothing from it: its
 * cycle came 6 µs closer to the raw client's with the idle rule
 * (bench/probes/sequential-cycles.ts).
 *
 * At most {@link batchSize} commands wait in the cork: a turn that issues
 * more writes each full batch at once and corks again for the next. Redis
 * then works through one batch while Node is still building the next, where
 * one write at the turn's end would leave each side idle while the other
 * works. In the benchmark's 64 concurrent loops (bench B) this took
 * `LockService` from 2.11x to 2.62x the raw client's cycles/s, and a fenced
 * acquisition, whose script keeps Redis busy longer, from 1.39x to 2.41x.
 *
 * Each command it sends is also queued in an entry of the library's own
 * class (see {@link ownQueueEntry}).
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
  // Commands written to `corked` since it was last flushed.
  let batched = 0;
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
    if (stream !== undefined || socket === undefined)
      return send(command, stream);
    if (socket !== corked) {
      // Idle (nothing awaits a reply), or not connected: ioredis writes or
      // queues it as it would without us.
      if (
        client.commandQueue.length === 0 ||
        !socket.writable ||
        client.status !== 'ready'
      ) {
        const reply = send(command);
        ownQueueEntry(client, command);
        return reply;
      }
      corked = socket;
      batched = 0;
      socket.cork();
      process.nextTick(uncork);
    }
    const reply = send(command);
    ownQueueEntry(client, command);
    if (++batched === batchSize) {
      // Flush the full batch; the turn's next command finds it corked.
      batched = 0;
      socket.uncork();
      socket.cork();
    }
    return reply;
  };
  return () => {
    uncork();
    if (original) client.sendCommand = original;
    else delete (client as Partial<Redis>).sendCommand;
  };
}
