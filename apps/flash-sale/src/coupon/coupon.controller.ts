import {
  Body,
  Controller,
  Get,
  Param,
  Post,
  Query,
  UseGuards,
} from '@nestjs/common';
import { LimitPipe } from '../common/pipes/limit.pipe.js';
import { PositiveIntPipe } from '../common/pipes/positive-int.pipe.js';
import type { OrderView } from '../order/order.types.js';
import { AdminTokenGuard } from '../web/admin-token.guard.js';
import { CouponService } from './coupon.service.js';
import type { CouponDetails, CouponView } from './coupon.types.js';
import {
  CreateCouponPipe,
  type CreateCouponInput,
} from './create-coupon.pipe.js';

@Controller('api/coupons')
export class CouponController {
  constructor(private readonly coupons: CouponService) {}

  /** 201 `{ id, name, price, stock, startAt, endAt, status }` */
  @Post()
  @UseGuards(AdminTokenGuard)
  create(
    @Body(new CreateCouponPipe()) input: CreateCouponInput,
  ): Promise<CouponView> {
    return this.coupons.create(input);
  }

  /** Newest first, with `remaining` (Redis) and `sold` (database). `?limit=` 1..1000, default 100. */
  @Get()
  list(@Query('limit', LimitPipe) limit: number): Promise<CouponDetails[]> {
    return this.coupons.list(limit);
  }

  @Get(':id')
  get(
    @Param('id', new PositiveIntPipe('id')) id: number,
  ): Promise<CouponDetails> {
    return this.coupons.get(id);
  }

  /** The coupon's orders, newest first, buyers as tags (public: no user ids). `?limit=` 1..1000, default 100. */
  @Get(':id/orders')
  orders(
    @Param('id', new PositiveIntPipe('id')) id: number,
    @Query('limit', LimitPipe) limit: number,
  ): Promise<OrderView[]> {
    return this.coupons.orderList(id, limit);
  }
}
