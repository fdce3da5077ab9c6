import { Module } from '@nestjs/common';
import { CouponModule } from '../coupon/coupon.module.js';
import { MetricsModule } from '../metrics/metrics.module.js';
import { DemoControlController } from './demo-control.controller.js';
import { InstanceRegistry } from './instance-registry.service.js';
import { PageController } from './page.controller.js';
import { SaleEventsController } from './sale-events.controller.js';
import { SaleFeed } from './sale-feed.service.js';
import { SaleSnapshots } from './sale-snapshot.service.js';

/**
 * The web page at `/`, the live feed it reads (`/api/events`), the figures
 * every instance publishes for it, and the demo's kill button.
 */
@Module({
  imports: [CouponModule, MetricsModule],
  controllers: [PageController, SaleEventsController, DemoControlController],
  providers: [SaleFeed, SaleSnapshots, InstanceRegistry],
  exports: [SaleFeed, InstanceRegistry],
})
// oxlint-disable-next-line typescript/no-extraneous-class -- a Nest module
export class WebModule {}
