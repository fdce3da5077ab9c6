import type { Migration } from 'kysely/migration';
import * as createCouponsAndOrders from './0001-create-coupons-and-orders.js';
import * as countSoldUnits from './0002-count-sold-units.js';

/**
 * Every migration, listed explicitly (no folder scanning, so the build output
 * and the TypeScript sources behave the same). Names sort in the order they run.
 */
export const migrations: Readonly<Record<string, Migration>> = {
  '0001-create-coupons-and-orders': createCouponsAndOrders,
  '0002-count-sold-units': countSoldUnits,
};
