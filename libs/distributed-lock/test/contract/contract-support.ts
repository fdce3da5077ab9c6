/** Small helpers shared by the themed contract modules. */

export {
  eventually,
  settledFlag,
  sleep,
} from '../../../../test/support/lock-fixtures.js';

/** Prefix of every lock key the contract's services store. */
export const keyPrefix = 'contract:';
/** Longest key the contract's services accept, in UTF-8 bytes. */
export const maxKeyLength = 200;

/** Milliseconds on the monotonic clock. */
export const now = (): number => performance.now();

/** A stopwatch started now: call it for the milliseconds since. */
export function stopwatch(): () => number {
  const start = now();
  return () => now() - start;
}

/** The error `promise` rejects with; fails the test when it resolves. */
export async function rejectionOf(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected a rejection, but the promise resolved');
}

/** Resolves with `signal`'s reason once it aborts. */
export function aborted(signal: AbortSignal): Promise<unknown> {
  if (signal.aborted) return Promise.resolve(signal.reason);
  return new Promise((resolve) =>
    signal.addEventListener('abort', () => resolve(signal.reason), {
      once: true,
    }),
  );
}

/** The median of `values`. */
export function median(values: readonly number[]): number {
  const sorted = values.toSorted((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1
    ? sorted[middle]
    : (sorted[middle - 1] + sorted[middle]) / 2;
}

/** Whether `values` strictly increase. */
export function strictlyIncreasing(values: readonly number[]): boolean {
  return values.every((value, i) => i === 0 || value > values[i - 1]);
}
