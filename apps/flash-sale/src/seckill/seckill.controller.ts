import { Controller, HttpCode, Param, Post, UseGuards } from '@nestjs/common';
import { PositiveIntPipe } from '../common/pipes/positive-int.pipe.js';
import { UserId } from '../common/user-id.decorator.js';
import { CouponOnSalePipe } from './coupon-on-sale.pipe.js';
import { SeckillPrecheckGuard } from './seckill-precheck.guard.js';
import { SeckillService } from './seckill.service.js';

/** The route's coupon: a positive integer naming a coupon that is on sale. */
const SaleCouponId = () =>
  Param('couponId', new PositiveIntPipe('couponId'), CouponOnSalePipe);

/**
 * The purchase route. Before anything queues for the coupon's lock, the guard
 * answers buyers that already bought or a coupon that is sold out (a read,
 * checked again under the lock), and the pipes reject malformed, unknown and
 * closed coupons: in a flash sale most requests end there, lock-free. The
 * service queues the rest for the coupon's next turn of its lock (see
 * `PurchaseQueue`). How long a purchase waits for its turn is the lock
 * module's `waitTime` (SECKILL_WAIT_MS, default 10 s); after that it gets
 * 429 BUSY. The lock is taken without an explicit lease: a turn holds it for
 * milliseconds, bound to the instance's lock session, so an instance that
 * dies holding it frees it within the session's TTL (SECKILL_SESSION_TTL_MS,
 * default 5 s) rather than a lease's.
 *
 * 201 `{ ok: true, orderId }`; 409 SOLD_OUT, ALREADY_PURCHASED or
 * NOT_ON_SALE; 404 NOT_FOUND; 429 BUSY with Retry-After; 400 BAD_REQUEST;
 * 503 UNAVAILABLE.
 */
@Controller('api/coupon/seckill')
@UseGuards(SeckillPrecheckGuard)
export class SeckillController {
  constructor(private readonly seckill: SeckillService) {}

  @Post(':couponId')
  @HttpCode(201)
  async buy(
    @SaleCouponId() couponId: number,
    @UserId() userId: string,
  ): Promise<{ ok: true; orderId: number }> {
    const { orderId } = await this.seckill.purchase(couponId, userId);
    return { ok: true as const, orderId };
  }
}
