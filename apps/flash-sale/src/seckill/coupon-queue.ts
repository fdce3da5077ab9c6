import type { PendingPurchase } from './pending-purchase.js';

/** Why a turn's wait for the lock stopped when its queue emptied. */
const NOBODY_WAITING = new Error(
  'No purchase of the coupon is waiting any more',
);

/**
 * The purchases of one coupon waiting on this instance for the coupon's next
 * turn of the lock, in arrival order. One turn at a time drains it (see
 * `PurchaseQueue`): each takes a batch, and the purchases that arrive
 * meanwhile wait for the next one.
 */
export class CouponQueue {
  /** Whether a drain loop is running for it. */
  draining = false;
  private waiting: PendingPurchase[] = [];
  /** Arrival number of each purchase, for {@link failArrivedBy}. */
  private readonly arrivals = new WeakMap<PendingPurchase, number>();
  private arrived = 0;
  private turn?: { controller: AbortController; release: () => void };

  add(purchase: PendingPurchase): void {
    this.arrived += 1;
    this.arrivals.set(purchase, this.arrived);
    this.waiting.push(purchase);
  }

  /** Purchases waiting and not answered. */
  get size(): number {
    return this.prune();
  }

  /** How many purchases have arrived so far (the last arrival's number). */
  get arrivedCount(): number {
    return this.arrived;
  }

  /**
   * Takes up to `max` waiting purchases of distinct users, in arrival order.
   * A second purchase by a user already in the batch waits for the next turn,
   * where it is answered as a repeat.
   */
  take(max: number): PendingPurchase[] {
    const batch: PendingPurchase[] = [];
    const users = new Set<string>();
    const kept: PendingPurchase[] = [];
    for (const purchase of this.waiting) {
      if (!purchase.pending) continue;
      if (batch.length < max && !users.has(purchase.userId)) {
        users.add(purchase.userId);
        purchase.taken();
        batch.push(purchase);
      } else {
        kept.push(purchase);
      }
    }
    this.waiting = kept;
    return batch;
  }

  /** Fails every waiting purchase with `error`. */
  failAll(error: unknown): void {
    for (const purchase of this.waiting.splice(0)) purchase.fail(error);
  }

  /** Fails the waiting purchases that arrived by arrival number `last`. */
  failArrivedBy(last: number, error: unknown): void {
    for (const purchase of this.waiting) {
      if ((this.arrivals.get(purchase) ?? 0) <= last) purchase.fail(error);
    }
    this.prune();
  }

  /**
   * The signal of a turn's wait for the lock: aborted when `soldOut` aborts
   * (with its reason) or when no purchase is left waiting, since the turn
   * would then serve nobody. Call {@link endTurn} when the turn is over.
   */
  turnSignal(soldOut: AbortSignal): AbortSignal {
    this.endTurn();
    const controller = new AbortController();
    const onSoldOut = () => controller.abort(soldOut.reason);
    if (soldOut.aborted) onSoldOut();
    else soldOut.addEventListener('abort', onSoldOut, { once: true });
    this.turn = {
      controller,
      release: () => soldOut.removeEventListener('abort', onSoldOut),
    };
    return controller.signal;
  }

  /** The turn's wait is over: its signal stops following the sold-out signal. */
  endTurn(): void {
    this.turn?.release();
    this.turn = undefined;
  }

  /** Stops the turn's wait for the lock, if one is waiting, with `reason`. */
  stopTurn(reason: unknown): void {
    this.turn?.controller.abort(reason);
  }

  /** Whether `error` is the turn's wait stopped because nobody was waiting. */
  static stoppedForNobody(error: unknown): boolean {
    return (error as { cause?: unknown } | null)?.cause === NOBODY_WAITING;
  }

  /** A waiting purchase's deadline passed: if nobody is left, the turn's wait stops. */
  expired(): void {
    if (this.prune() === 0) this.turn?.controller.abort(NOBODY_WAITING);
  }

  /** Drops answered purchases; returns how many are left. */
  private prune(): number {
    if (this.waiting.some((purchase) => !purchase.pending)) {
      this.waiting = this.waiting.filter((purchase) => purchase.pending);
    }
    return this.waiting.length;
  }
}
