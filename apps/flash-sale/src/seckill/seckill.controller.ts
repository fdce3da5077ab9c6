import {
  Controller,
  HttpCode,
  Injectable,
  Param,
  Post,
  UseGuards,
} from '@nestjs/common';
import { DistributedLock } from '@app/distributed-lock';
import { PositiveIntPipe } from '../common/pipes/positive-int.pipe.js';
import { UserId } from '../common/user-id.decorator.js';
import { CouponOnSalePipe } from './coupon-on-sale.pipe.js';
import { SeckillPrecheckGuard } from './seckill-precheck.guard.js';
import { SeckillService } from './seckill.service.js';
import { SoldOutBoard } from './sold-out-board.js';

/**
 * The purchase route. Before anything queues for the coupon's lock, the guard
 * answers buyers that already bought or a coupon that is sold out (a read,
 * checked again under the lock), and the pipes reject malformed, unknown and
 * closed coupons: in a flash sale most requests end there, lock-free.
 *
 * 201 `{ ok: true, orderId }`; 409 SOLD_OUT, ALREADY_PURCHASED or
 * NOT_ON_SALE; 404 NOT_FOUND; 429 BUSY with Retry-After; 400 BAD_REQUEST;
 * 503 UNAVAILABLE.
 */
/** The route's coupon: a positive integer naming a coupon that is on sale. */
const SaleCouponId = () =>
  Param('couponId', new PositiveIntPipe('couponId'), CouponOnSalePipe);

type PurchaseAnswer = { ok: true; orderId: number };

// Decorated so that its constructor's parameter types are emitted for both subclasses.
@Injectable()
abstract class SeckillRoute {
  constructor(protected readonly seckill: SeckillService) {}

  protected async purchase(
    couponId: number,
    userId: string,
  ): Promise<PurchaseAnswer> {
    const { orderId } = await this.seckill.purchase(couponId, userId);
    return { ok: true as const, orderId };
  }
}

/**
 * One purchase per coupon at a time, across all instances. How long a
 * purchase waits for its turn is the lock module's `waitTime` (SECKILL_WAIT_MS,
 * default 10 s); after that it gets 429 BUSY. No explicit lease: a purchase
 * holds the lock for milliseconds, and the hold is bound to the instance's
 * lock session, so an instance that dies holding it frees it within the
 * session's TTL (SECKILL_SESSION_TTL_MS, default 5 s) rather than a lease's.
 */
@Controller('api/coupon/seckill')
@UseGuards(SeckillPrecheckGuard)
export class SeckillController extends SeckillRoute {
  constructor(
    seckill: SeckillService,
    private readonly board: SoldOutBoard,
  ) {
    super(seckill);
  }

  @Post(':couponId')
  @HttpCode(201)
  @DistributedLock('coupon:<0>', {
    // Queued purchases stop waiting once the coupon sold out: 409 SOLD_OUT.
    signal(this: SeckillController, couponId: number) {
      return this.board.signalFor(couponId);
    },
  })
  buy(
    @SaleCouponId() couponId: number,
    @UserId() userId: string,
  ): Promise<PurchaseAnswer> {
    return this.purchase(couponId, userId);
  }
}

/**
 * SECKILL_LOCK=off: the same route with seckill.lua and the database's unique
 * constraint alone, so that a load test shows what the lock costs. Not for a
 * real sale: a reconciliation (at startup, after Redis lost the coupon) can
 * then run between another purchase's script and its insert.
 */
@Controller('api/coupon/seckill')
@UseGuards(SeckillPrecheckGuard)
export class UnlockedSeckillController extends SeckillRoute {
  @Post(':couponId')
  @HttpCode(201)
  buy(
    @SaleCouponId() couponId: number,
    @UserId() userId: string,
  ): Promise<PurchaseAnswer> {
    return this.purchase(couponId, userId);
  }
}
