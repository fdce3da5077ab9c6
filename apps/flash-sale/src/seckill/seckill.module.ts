import { Module } from '@nestjs/common';
import { CouponModule } from '../coupon/coupon.module.js';
import { OrderModule } from '../order/order.module.js';
import { CouponOnSalePipe } from './coupon-on-sale.pipe.js';
import { SeckillController } from './seckill.controller.js';
import { SeckillService } from './seckill.service.js';

@Module({
  imports: [CouponModule, OrderModule],
  controllers: [SeckillController],
  providers: [SeckillService, CouponOnSalePipe],
})
// oxlint-disable-next-line typescript/no-extraneous-class -- a Nest module
export class SeckillModule {}
