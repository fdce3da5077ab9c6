import type { LockBusy, LockGrant } from '../lock-backend.js';
import { startCountdown, stopCountdown, type Countdown } from './countdown.js';

/** A caller queued for a busy key. */
export interface Waiter {
  readonly token: string;
  readonly leaseMs: number;
  readonly resolve: (result: LockGrant | LockBusy) => void;
  readonly signal?: AbortSignal;
  onAbort?: () => void;
  timer?: Countdown;
  settled: boolean;
}

/** What a caller brings to the queue. */
export type WaiterInit = Pick<
  Waiter,
  'token' | 'leaseMs' | 'resolve' | 'signal'
>;

/**
 * Queues a caller at the end of `queue`. When its wait runs out or its signal
 * aborts before it is served, it leaves the queue and is settled with what
 * `leave()` answers.
 */
export function enqueueWaiter(
  queue: Waiter[],
  init: WaiterInit,
  waitMs: number,
  leave: () => LockBusy,
): void {
  const waiter: Waiter = { ...init, settled: false };
  const giveUp = (): void => {
    if (waiter.settled) {
      return;
    }
    const index = queue.indexOf(waiter);
    if (index !== -1) {
      queue.splice(index, 1);
    }
    settleWaiter(waiter, leave());
  };
  if (Number.isFinite(waitMs)) {
    waiter.timer = startCountdown(waitMs, giveUp);
  }
  if (waiter.signal !== undefined) {
    waiter.onAbort = giveUp;
    waiter.signal.addEventListener('abort', giveUp, { once: true });
  }
  queue.push(waiter);
}

/** Resolves a waiter once, dropping its timer and abort listener. */
export function settleWaiter(
  waiter: Waiter,
  result: LockGrant | LockBusy,
): void {
  if (waiter.settled) {
    return;
  }
  waiter.settled = true;
  stopCountdown(waiter.timer);
  waiter.timer = undefined;
  if (waiter.onAbort !== undefined) {
    waiter.signal?.removeEventListener('abort', waiter.onAbort);
    waiter.onAbort = undefined;
  }
  waiter.resolve(result);
}
