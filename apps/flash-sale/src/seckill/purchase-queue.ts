import {
  Inject,
  Injectable,
  Logger,
  type BeforeApplicationShutdown,
} from '@nestjs/common';
import { LockError, LockNotAcquiredError } from '@app/distributed-lock';
import { busy, unavailable } from '../common/app-exception.js';
import { APP_CONFIG, type AppConfig } from '../config/app-config.js';
import { CouponQueue } from './coupon-queue.js';
import { PendingPurchase, type PurchaseAnswer } from './pending-purchase.js';
import { SaleTurns } from './sale-turns.js';

/**
 * Queues each purchase for its coupon's next turn of the lock on this
 * instance, and runs the turns one after another while purchases wait.
 *
 * Why batches: a flash sale's purchases of one coupon must go one turn of
 * its lock at a time, and each turn costs a hand-off between instances, a
 * script and a database statement. Selling every purchase queued here in
 * one turn (seckill.lua for all of them at once, one statement for all their
 * orders) pays those once per batch instead of once per purchase.
 *
 * A purchase waits at most `SECKILL_WAIT_MS` for its turn, then gets
 * `429 BUSY`; once the coupon sells out the waiting ones get `409 SOLD_OUT`.
 */
@Injectable()
export class PurchaseQueue implements BeforeApplicationShutdown {
  private readonly logger = new Logger('PurchaseQueue');
  private readonly queues = new Map<number, CouponQueue>();
  /** Set once the instance stops: the answer of every purchase from then on. */
  private stopping?: Error;

  constructor(
    private readonly turns: SaleTurns,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  /** Queues the user's purchase of the coupon; resolves with its order, or rejects with its answer. */
  buy(couponId: number, userId: string): Promise<PurchaseAnswer> {
    if (this.stopping) return Promise.reject(this.stopping);
    let queue = this.queues.get(couponId);
    if (!queue) {
      queue = new CouponQueue();
      this.queues.set(couponId, queue);
    }
    const purchase = new PendingPurchase(userId);
    const waiting = queue;
    purchase.expireAfter(
      this.config.seckill.waitTime,
      () => busy(1),
      () => waiting.expired(),
    );
    queue.add(purchase);
    if (!queue.draining) void this.drain(couponId, queue);
    return purchase.answer;
  }

  /**
   * The instance is stopping (before its HTTP server waits for the requests
   * in flight): purchases waiting for a turn, and any that arrive now, get
   * 503 at once; a turn already selling finishes its batch.
   */
  beforeApplicationShutdown(): void {
    this.stopping = unavailable(new Error('The instance is shutting down'));
    for (const queue of this.queues.values()) {
      queue.failAll(this.stopping);
      queue.stopTurn(this.stopping);
    }
  }

  /** Runs the coupon's turns while purchases wait for one. */
  private async drain(couponId: number, queue: CouponQueue): Promise<void> {
    queue.draining = true;
    try {
      while (queue.size > 0) {
        const arrivedBefore = queue.arrivedCount;
        try {
          await this.turns.sellNext(couponId, queue);
        } catch (error) {
          this.turnFailed(queue, error, arrivedBefore);
        } finally {
          queue.endTurn();
        }
      }
    } finally {
      queue.draining = false;
      if (this.queues.get(couponId) === queue) this.queues.delete(couponId);
    }
  }

  /**
   * The turn could not take the lock. Stopped for nobody: nothing to do.
   * Stopped by the sell-out: every waiting purchase hears it. Busy for the
   * whole wait: those that waited all of it (arrived before it began) get
   * 429; later ones get a turn of their own. Anything else (Redis down, a
   * bad key): every waiting purchase fails with it.
   */
  private turnFailed(
    queue: CouponQueue,
    error: unknown,
    arrivedBefore: number,
  ): void {
    if (CouponQueue.stoppedForNobody(error)) return;
    if (error instanceof LockNotAcquiredError) {
      if (error.cause !== undefined) queue.failAll(error.cause);
      else queue.failArrivedBy(arrivedBefore, busy(1));
      return;
    }
    if (!(error instanceof LockError)) {
      this.logger.error(
        `A turn of a coupon's sale failed: ${(error as Error)?.message ?? String(error)}`,
      );
    }
    queue.failAll(error);
  }
}
