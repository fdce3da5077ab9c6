import { Inject, Injectable } from '@nestjs/common';
import { currentLock } from '@app/distributed-lock';
import {
  alreadyPurchased,
  soldOut,
  unavailable,
} from '../common/app-exception.js';
import type { Coupon } from '../coupon/coupon.types.js';
import { StockReconciler } from '../coupon/stock-reconciler.js';
import { observeSaleBatch } from '../metrics/sale-batches.js';
import { registerSaleStepMetric, timeSaleStep } from '../metrics/sale-steps.js';
import {
  PurchaseLedger,
  type LedgerOutcome,
} from '../order/purchase-ledger.js';
import { REDIS_CLIENT, type RedisClient } from '../redis/redis-client.js';
import type { PendingPurchase } from './pending-purchase.js';
import { assertOnSale } from './sale-window.js';
import { SaleSettlement } from './sale-settlement.js';
import {
  BuyResult,
  defineSeckillScripts,
  type SeckillScripts,
} from './seckill-scripts.js';
import { SoldOutBoard } from './sold-out-board.js';

/** How long a sale without the lock (SECKILL_LOCK=off) waits for it to repair the coupon. */
const UNLOCKED_REPAIR_WAIT_MS = 1_000;

/** What seckill.lua made of a batch. */
interface TakenUnits {
  /** Redis took a unit for each: their orders are to be written. */
  readonly bought: PendingPurchase[];
  /** Redis has them as buyers already. */
  readonly repeats: PendingPurchase[];
}

/**
 * Sells a batch of purchases of one coupon: seckill.lua takes a unit for
 * each buyer in Redis in one atomic call, then one statement writes their
 * orders. Call it holding the coupon's lock: seckill.lua alone keeps Redis
 * right, the lock keeps Redis and the database in step (no other sale or
 * reconciliation of this coupon runs between the script and the statement),
 * and the database's own count refuses an oversale whatever happened to
 * Redis or to the lock.
 */
@Injectable()
export class BatchSale {
  private readonly scripts: SeckillScripts;

  constructor(
    @Inject(REDIS_CLIENT) redis: RedisClient,
    private readonly ledger: PurchaseLedger,
    private readonly reconciler: StockReconciler,
    private readonly settlement: SaleSettlement,
    private readonly board: SoldOutBoard,
  ) {
    this.scripts = defineSeckillScripts(redis);
    registerSaleStepMetric();
  }

  /** Sells to each purchase of `batch` (distinct users) and answers each one. */
  async sell(coupon: Coupon, batch: readonly PendingPurchase[]): Promise<void> {
    observeSaleBatch(batch.length);
    try {
      assertOnSale(coupon);
      if (this.reconciler.isSuspect(coupon.id)) {
        await this.reconciler.reconcile(coupon, this.repairWait());
      }
      let round: readonly PendingPurchase[] = batch;
      for (let rebuilt = false; round.length > 0; rebuilt = true) {
        const { bought, repeats } = await timeSaleStep('script', () =>
          this.takeUnits(coupon, round),
        );
        if (bought.length > 0) await this.recordOrders(coupon, bought);
        const ghosts = await this.answerRepeatBuyers(coupon, repeats);
        if (ghosts.length === 0) break;
        if (rebuilt) {
          throw new Error(
            'Redis still had buyers without orders after a rebuild',
          );
        }
        // Buyers Redis has without an order: purchases that ended before
        // their commit. Answering 409 would be false: rebuild Redis from the
        // orders (no unit is held for an unwritten order now), then sell.
        await this.reconciler.reconcile(coupon, this.repairWait());
        round = ghosts;
      }
    } catch (error) {
      // The app's exception filter answers it (503 for Redis or the
      // database, 409 for a closed sale); units Redis took are settled above.
      for (const purchase of batch) purchase.fail(error);
    }
  }

  /** Runs seckill.lua for the batch; answers the sold-out ones. */
  private async takeUnits(
    coupon: Coupon,
    purchases: readonly PendingPurchase[],
  ): Promise<TakenUnits> {
    const users = purchases.map((purchase) => purchase.userId);
    let answers = await this.scripts.buy(coupon.id, users);
    if (answers === 'not-loaded') {
      // Redis lost the coupon (restarted, flushed) or never had it: load it
      // from the database under the lock we hold, then try again.
      await this.reconciler.reconcile(coupon, this.repairWait());
      answers = await this.scripts.buy(coupon.id, users);
      if (answers === 'not-loaded') {
        throw new Error(`Redis does not keep coupon ${coupon.id}'s stock`);
      }
    }
    const taken: TakenUnits = { bought: [], repeats: [] };
    for (const [i, answer] of answers.entries()) {
      const purchase = purchases[i];
      if (answer === BuyResult.Bought) taken.bought.push(purchase);
      else if (answer === BuyResult.AlreadyBought) taken.repeats.push(purchase);
      else purchase.fail(soldOut());
    }
    if (taken.bought.length < purchases.length - taken.repeats.length) {
      this.board.announce(coupon.id);
    }
    return taken;
  }

  /** Writes the orders of `bought` in one statement and answers them. */
  private async recordOrders(
    coupon: Coupon,
    bought: readonly PendingPurchase[],
  ): Promise<void> {
    const signal = currentLock()?.signal;
    let outcome: LedgerOutcome;
    try {
      outcome = await timeSaleStep('database', () =>
        this.ledger.record(
          coupon.id,
          bought.map((purchase) => purchase.userId),
          coupon.price,
          signal,
        ),
      );
    } catch (error) {
      await this.settlement.settleFailed(coupon, bought, error);
      return;
    }
    if (outcome.kind === 'over-stock') {
      await this.recordOneByOne(coupon, bought, signal);
      return;
    }
    await this.answerRecorded(coupon, bought, outcome.orders);
  }

  /**
   * The database has fewer units left than Redis sold in this batch: each
   * purchase gets a statement of its own, in arrival order, until the
   * database refuses one; that one and the rest are sold out, and Redis,
   * wrong, is rewritten from the orders.
   */
  private async recordOneByOne(
    coupon: Coupon,
    bought: readonly PendingPurchase[],
    signal: AbortSignal | undefined,
  ): Promise<void> {
    const refused: PendingPurchase[] = [];
    for (const purchase of bought) {
      if (refused.length > 0) {
        refused.push(purchase);
        continue;
      }
      try {
        const outcome = await this.ledger.record(
          coupon.id,
          [purchase.userId],
          coupon.price,
          signal,
        );
        if (outcome.kind === 'over-stock') refused.push(purchase);
        else await this.answerRecorded(coupon, [purchase], outcome.orders);
      } catch (error) {
        await this.settlement.settleFailed(coupon, [purchase], error);
      }
    }
    if (refused.length === 0) return;
    await this.settlement.repairRedis(coupon, refused, this.repairWait());
    for (const purchase of refused) purchase.fail(soldOut());
    this.board.announce(coupon.id);
  }

  /**
   * Answers purchases whose statement ran: each with its new order, or, for
   * a user the database had an order for already (Redis had lost it, and
   * took a unit for them), 409 with that order, after Redis is repaired.
   */
  private async answerRecorded(
    coupon: Coupon,
    purchases: readonly PendingPurchase[],
    orders: ReadonlyMap<string, number>,
  ): Promise<void> {
    const earlier: PendingPurchase[] = [];
    for (const purchase of purchases) {
      const orderId = orders.get(purchase.userId);
      if (orderId === undefined) earlier.push(purchase);
      else purchase.succeed(orderId);
    }
    if (earlier.length === 0) return;
    await this.settlement.repairRedis(coupon, earlier, this.repairWait());
    const ghosts = await this.answerRepeatBuyers(coupon, earlier);
    for (const purchase of ghosts) purchase.fail(unavailable());
  }

  /**
   * Answers the buyers Redis already had: 409 with their order. Returns
   * those without one (ghosts, to be sold to after a rebuild).
   */
  private async answerRepeatBuyers(
    coupon: Coupon,
    repeats: readonly PendingPurchase[],
  ): Promise<PendingPurchase[]> {
    if (repeats.length === 0) return [];
    const orders = await this.ledger.ordersOf(
      coupon.id,
      repeats.map((purchase) => purchase.userId),
    );
    const ghosts: PendingPurchase[] = [];
    for (const purchase of repeats) {
      const orderId = orders.get(purchase.userId);
      if (orderId === undefined) ghosts.push(purchase);
      else purchase.fail(alreadyPurchased(orderId));
    }
    return ghosts;
  }

  /** Holding the coupon's lock a repair joins it at once; without it, it waits briefly. */
  private repairWait(): number | undefined {
    return currentLock() ? undefined : UNLOCKED_REPAIR_WAIT_MS;
  }
}
