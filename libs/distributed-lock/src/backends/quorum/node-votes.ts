import { LockBackendError } from '../../errors/lock-errors.js';
import { answerDeadline } from '../answer-deadline.js';

/** One node's answer to a call sent to every node. */
export interface NodeReply<T> {
  /** Index of the node in the backend's `nodes`. */
  readonly node: number;
  readonly value: T;
}

/** What came back from one round of {@link askEveryNode}. */
export interface NodeReplies<T> {
  /** The answers in the order they arrived. */
  readonly replies: readonly NodeReply<T>[];
  /** Nodes that failed, did not answer in time, or were not waited for. */
  readonly silent: number;
  /** The first failure, for error messages. */
  readonly firstError?: unknown;
  /**
   * Resolves once every call settled, or at the timeout, with the nodes that
   * never answered (failed or still silent). Answers that come after the
   * round resolved and before this reach `onLate` first. (Made when first
   * asked for: most rounds never do.)
   */
  readonly rest: () => Promise<readonly number[]>;
}

/**
 * Sends `call` to every one of `count` nodes at once and resolves when each
 * answered, failed or took longer than `timeoutMs`, or sooner, as soon as
 * `decided(replies, pending)` says more answers cannot change the outcome.
 * Never rejects: a node that fails or is late is silent this round.
 *
 * An answer that arrives after the round resolved goes to `onLate`, for
 * example to give back a vote nobody counted. One timer serves the round;
 * it runs until every call settled or the time is up.
 * Answers that reached the process before the timeout count even when it
 * was itself stalled past it (see {@link answerDeadline}).
 */
export function askEveryNode<T>(
  count: number,
  call: (node: number) => Promise<T>,
  timeoutMs: number,
  decided?: (replies: readonly NodeReply<T>[], pending: number) => boolean,
  onLate?: (reply: NodeReply<T>) => void,
): Promise<NodeReplies<T>> {
  return new Promise((resolve) => {
    const replies: NodeReply<T>[] = [];
    const answered = Array.from({ length: count }, () => false);
    let pending = count;
    let firstError: unknown;
    let done = false;
    let closed = false;
    // `rest` is made only when asked for: most rounds never look at it.
    let rest: Promise<readonly number[]> | undefined;
    let endRest: ((silent: readonly number[]) => void) | undefined;
    const silentNodes = (): number[] => {
      const silent: number[] = [];
      for (let node = 0; node < count; node++)
        if (!answered[node]) silent.push(node);
      return silent;
    };
    const finish = (): void => {
      if (done) return;
      done = true;
      resolve({
        replies,
        silent: count - replies.length,
        firstError,
        rest: () =>
          (rest ??= closed
            ? Promise.resolve(silentNodes())
            : new Promise((r) => (endRest = r))),
      });
    };
    const close = (): void => {
      cancelDeadline();
      finish();
      closed = true;
      endRest?.(silentNodes());
    };
    const cancelDeadline = answerDeadline(timeoutMs, () => {
      firstError ??= new Error(`no answer within ${timeoutMs} ms`);
      close();
    });
    const settleOne = (): void => {
      pending -= 1;
      if (pending === 0) close();
      else if (!done && decided?.(replies, pending)) finish();
    };
    for (let node = 0; node < count; node++) {
      let pendingCall: Promise<T>;
      try {
        pendingCall = call(node);
      } catch (error) {
        pendingCall = Promise.reject(error as Error);
      }
      pendingCall.then(
        (value) => {
          answered[node] = true;
          if (done) onLate?.({ node, value });
          else replies.push({ node, value });
          settleOne();
        },
        (error: unknown) => {
          if (!done) firstError ??= error;
          settleOne();
        },
      );
    }
    if (count === 0) close();
  });
}

/**
 * The verdict of a majority on a yes/no question: `yes` once `quorum` nodes
 * said yes, `no` once so many said no (or not counting) that a majority of
 * yes is out of reach, `unknown` when too few answered to tell.
 */
export function verdict(
  yes: number,
  no: number,
  count: number,
  quorum: number,
): 'yes' | 'no' | 'unknown' {
  if (yes >= quorum) return 'yes';
  if (no > count - quorum) return 'no';
  return 'unknown';
}

/** The nodes a yes/no question goes to, and how long each may take. */
export interface Majority {
  readonly count: number;
  readonly quorum: number;
  readonly timeoutMs: number;
}

/**
 * Asks every node a yes/no question: resolves true once a majority said yes
 * (as `isYes` counts them), false once enough said anything else that a
 * majority of yes is out of reach, and rejects with `LockBackendError` when
 * too few answered to tell.
 */
export async function askForMajority<T>(
  what: string,
  majority: Majority,
  call: (node: number) => Promise<T>,
  isYes: (reply: NodeReply<T>) => boolean,
): Promise<boolean> {
  const { count, quorum, timeoutMs } = majority;
  const outcomeOf = (replies: readonly NodeReply<T>[]) => {
    const yes = replies.filter(isYes).length;
    return verdict(yes, replies.length - yes, count, quorum);
  };
  const round = await askEveryNode(
    count,
    call,
    timeoutMs,
    (replies) => outcomeOf(replies) !== 'unknown',
  );
  const outcome = outcomeOf(round.replies);
  if (outcome === 'unknown')
    throw new LockBackendError(
      describeSilence(
        what,
        round.replies.length,
        count,
        quorum,
        round.firstError,
      ),
    );
  return outcome === 'yes';
}

/** Why a round could not decide, for `LockBackendError` messages. */
export function describeSilence(
  what: string,
  answered: number,
  count: number,
  quorum: number,
  firstError?: unknown,
): string {
  const cause =
    firstError === undefined
      ? ''
      : `; first failure: ${(firstError as Error)?.message ?? String(firstError)}`;
  return `Redlock ${what}: only ${answered} of ${count} Redis nodes answered, a majority is ${quorum}${cause}`;
}
