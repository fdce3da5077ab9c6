/**
 * A time limit on answers from Redis that does not blame Redis for this
 * process's own stalls. Node runs due timers before it reads sockets, so
 * after the process was blocked past the limit (a long GC pause, a
 * CPU-bound handler) a plain timer fires before answers that came in time
 * are read. This one calls `onExpired` on the check phase after its timer,
 * once the sockets were read; an answer read there settles first.
 *
 * `unref` applies to the timer only: the immediate stays referenced, since
 * an unreferenced one would wait in that pass over the sockets for the next
 * I/O (a paused Redis kept the expiry back until it thawed).
 *
 * @returns a function that cancels the limit
 */
export function answerDeadline(
  ms: number,
  onExpired: () => void,
  options: { readonly unref?: boolean } = {},
): () => void {
  let overdue: NodeJS.Immediate | undefined;
  const timer = setTimeout(
    () => {
      overdue = setImmediate(onExpired);
    },
    Math.max(0, ms),
  );
  if (options.unref) timer.unref();
  return () => {
    clearTimeout(timer);
    if (overdue !== undefined) clearImmediate(overdue);
  };
}

/**
 * `pending`'s outcome, or a rejection once it has not settled within `ms`,
 * by the rule of {@link answerDeadline}: with `expired()`'s error, by
 * default "no answer within `ms` ms".
 */
export function answerWithin<T>(
  pending: Promise<T>,
  ms: number,
  options: {
    readonly unref?: boolean;
    readonly expired?: () => Error;
  } = {},
): Promise<T> {
  const { expired = () => new Error(`no answer within ${ms} ms`) } = options;
  return new Promise<T>((resolve, reject) => {
    const cancel = answerDeadline(ms, () => reject(expired()), options);
    pending.then(
      (value) => {
        cancel();
        resolve(value);
      },
      (error: unknown) => {
        cancel();
        reject(error as Error);
      },
    );
  });
}

/**
 * Resolves true when `pending` settles within `ms`, false otherwise, by the
 * rule of {@link answerDeadline}; never rejects.
 */
export function settlesWithin(
  pending: Promise<unknown>,
  ms: number,
  options: { readonly unref?: boolean } = {},
): Promise<boolean> {
  return new Promise((resolve) => {
    const cancel = answerDeadline(ms, () => resolve(false), options);
    const settled = (): void => {
      cancel();
      resolve(true);
    };
    pending.then(settled, settled);
  });
}
