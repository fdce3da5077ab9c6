import type { Redis } from 'ioredis';

type CommandQueue = Redis['commandQueue'];
type QueueEntry = ReturnType<CommandQueue['shift']> & object;

/** What ioredis keeps per command awaiting its reply, as a class of its own. */
class QueuedCommand {
  constructor(
    public command: QueueEntry['command'],
    public stream: QueueEntry['stream'],
    public select: QueueEntry['select'],
  ) {}
}

/**
 * Replaces the entry ioredis just queued for `command` (a `{ command,
 * stream, select }` object literal) with an equal one built by a class,
 * and empties the literal.
 *
 * Why: V8 tracks survival per object literal in the code ("allocation
 * sites") and, when most objects of one were still alive at a young-
 * generation GC, allocates that literal's later objects in the old
 * generation at once ("pretenuring"). ioredis's entries live exactly as long
 * as their command is in flight, so under load that one literal, shared by
 * every ioredis client in the process, can be pretenured. An old entry that
 * died still points at its command, so every young GC until the next full
 * one keeps each finished command alive, with its arguments, promise and
 * reply, and promotes them: a few hundred KB per young GC. A process
 * either falls into that mode or not, and stays: it was the "process mode"
 * that cost a fenced acquisition's 64 concurrent loops (bench B) about a
 * sixth of their throughput in some processes and nothing in others. With
 * the entries swapped here the literal's objects die at once, so it is not
 * pretenured for this client's commands, and an entry allocated old anyway
 * points at nothing. (B, fenced against unfenced in the same turns: 0.84x
 * and 0.87x as ioredis queues them; 0.95x with ioredis patched to queue
 * class instances; 0.93x with V8's pretenuring switched off.)
 */
export function ownQueueEntry(client: Redis, command: unknown): void {
  const queue = client.commandQueue;
  const entry = queue.peekBack();
  // Queued offline (not connected), or sent elsewhere: nothing to swap.
  if (entry === undefined || entry.command !== command) return;
  queue.pop();
  queue.push(new QueuedCommand(entry.command, entry.stream, entry.select));
  const emptied = entry as Partial<QueueEntry>;
  emptied.command = undefined;
  emptied.stream = undefined;
}
