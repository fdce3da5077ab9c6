import {
  Inject,
  Injectable,
  type CanActivate,
  type ExecutionContext,
} from '@nestjs/common';
import { alreadyPurchased, soldOut } from '../common/app-exception.js';
import { USER_ID_MAX_LENGTH } from '../common/pipes/user-id.pipe.js';
import { buyersKey, stockKey } from '../coupon/stock-cache.js';
import { OrderRepository } from '../order/order.repository.js';
import { REDIS_CLIENT, type RedisClient } from '../redis/redis-client.js';
import { SoldOutBoard } from './sold-out-board.js';

const COUPON_ID = /^[1-9][0-9]{0,15}$/;
const USER_ID = /^[A-Za-z0-9_-]+$/;

/**
 * Answers the two outcomes that dominate a flash sale, sold out and already
 * bought, with one Redis read (and, for a repeat buyer, an indexed lookup of
 * the order) before the request queues for the coupon's lock. Only a definite answer stops the request: malformed input goes on to
 * the pipes (400), and a coupon Redis does not know goes on to the locked
 * purchase, which reloads it. seckill.lua checks both again under the lock,
 * so a stale read here can only send a request to the lock, never sell.
 */
@Injectable()
export class SeckillPrecheckGuard implements CanActivate {
  constructor(
    @Inject(REDIS_CLIENT) private readonly redis: RedisClient,
    private readonly orders: OrderRepository,
    private readonly board: SoldOutBoard,
  ) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const request = context.switchToHttp().getRequest<{
      params?: Record<string, unknown>;
      headers: Record<string, unknown>;
    }>();
    const couponText = request.params?.couponId;
    const userId = request.headers['userid'];
    if (
      typeof couponText !== 'string' ||
      !COUPON_ID.test(couponText) ||
      typeof userId !== 'string' ||
      userId.length > USER_ID_MAX_LENGTH ||
      !USER_ID.test(userId)
    ) {
      return true;
    }
    const couponId = Number(couponText);
    let stock: string | null;
    let bought: number;
    try {
      [stock, bought] = await Promise.all([
        this.redis.get(stockKey(couponId)),
        this.redis.sismember(buyersKey(couponId), userId),
      ]);
    } catch {
      // Redis trouble is for the purchase to report (503), not the shortcut.
      return true;
    }
    if (stock === null) return true;
    // Same order as seckill.lua: a buyer hears "already bought" even when sold out.
    if (bought === 1) await this.answerRepeatBuyer(couponId, userId);
    if (Number(stock) <= 0) {
      // Purchases of it still queued here for the lock can stop waiting.
      this.board.announce(couponId);
      throw soldOut();
    }
    return true;
  }

  /**
   * 409 with the user's order when the database has it. Redis alone is not
   * enough: a buyer recorded by a purchase that never committed (a ghost)
   * goes on to the locked purchase, which repairs Redis and sells.
   */
  private async answerRepeatBuyer(
    couponId: number,
    userId: string,
  ): Promise<void> {
    const order = await this.orders.find(couponId, userId).catch(() => null);
    if (order) throw alreadyPurchased(order.id);
  }
}
