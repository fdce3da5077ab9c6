import { Module } from '@nestjs/common';
import { CouponModule } from '../coupon/coupon.module.js';
import { PageController } from './page.controller.js';
import { SaleEventsController } from './sale-events.controller.js';
import { SaleFeed } from './sale-feed.service.js';

/** The web page at `/` and the live feed it reads (`/api/events`). */
@Module({
  imports: [CouponModule],
  controllers: [PageController, SaleEventsController],
  providers: [SaleFeed],
  exports: [SaleFeed],
})
// oxlint-disable-next-line typescript/no-extraneous-class -- a Nest module
export class WebModule {}
