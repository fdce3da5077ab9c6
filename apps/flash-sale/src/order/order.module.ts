import { Module } from '@nestjs/common';
import { OrderRepository } from './order.repository.js';

@Module({
  providers: [OrderRepository],
  exports: [OrderRepository],
})
// oxlint-disable-next-line typescript/no-extraneous-class -- a Nest module
export class OrderModule {}
