import { Controller, HttpCode, Param, Post } from '@nestjs/common';
import { DistributedLock } from '@app/distributed-lock';
import { PositiveIntPipe } from '../common/pipes/positive-int.pipe.js';
import { UserId } from '../common/user-id.decorator.js';
import { CouponOnSalePipe } from './coupon-on-sale.pipe.js';
import { SeckillService } from './seckill.service.js';

/** Lease of the coupon's lock during one purchase. */
export const SECKILL_LEASE_TIME = 30_000;

@Controller('api/coupon/seckill')
export class SeckillController {
  constructor(private readonly seckill: SeckillService) {}

  /**
   * Buys one unit of the coupon for the user in the `userId` header.
   *
   * One purchase per coupon at a time, across all instances. How long a
   * purchase waits for its turn is the lock module's `waitTime`, set from
   * SECKILL_WAIT_MS (default 10 s); after that it gets 429 BUSY.
   *
   * 201 `{ ok: true, orderId }`; 409 SOLD_OUT, ALREADY_PURCHASED or
   * NOT_ON_SALE; 404 NOT_FOUND; 429 BUSY with Retry-After; 400 BAD_REQUEST;
   * 503 UNAVAILABLE.
   */
  @Post(':couponId')
  @HttpCode(201)
  @DistributedLock('coupon:<0>', { leaseTime: SECKILL_LEASE_TIME })
  async buy(
    @Param('couponId', new PositiveIntPipe('couponId'), CouponOnSalePipe)
    couponId: number,
    @UserId() userId: string,
  ): Promise<{ ok: true; orderId: number }> {
    const { orderId } = await this.seckill.purchase(couponId, userId);
    return { ok: true, orderId };
  }
}
