import { Module } from '@nestjs/common';
import { OrderRepository } from './order.repository.js';
import { PurchaseLedger } from './purchase-ledger.js';

@Module({
  providers: [OrderRepository, PurchaseLedger],
  exports: [OrderRepository, PurchaseLedger],
})
// oxlint-disable-next-line typescript/no-extraneous-class -- a Nest module
export class OrderModule {}
