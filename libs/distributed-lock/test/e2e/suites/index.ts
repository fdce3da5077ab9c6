import type { HttpAdapterName } from '../fixtures/http-app.js';
import { useHttpLockSuite } from '../fixtures/http-lock-suite.js';
import { describeErrorMapping } from './error-mapping.js';
import {
  describeHandlerErrors,
  describeObservableHandlers,
} from './handler-outcomes.js';
import { describeInvalidKeys } from './invalid-keys.js';
import {
  describeEncodedUserValues,
  describeKeysFromArguments,
} from './keys-from-arguments.js';
import { describeOneLockPerCoupon } from './one-lock-per-coupon.js';
import { describeRedisUnreachable } from './redis-unreachable.js';
import { describeRouteMetadata } from './route-metadata.js';
import { describeStartupErrors } from './startup-errors.js';

/**
 * The HTTP end-to-end suite of `@DistributedLock`, run once per platform
 * adapter against a private `redis-server`. Each theme lives in a module of
 * its own here; they share one app and run in this order.
 */
export function defineHttpLockSuite(adapter: HttpAdapterName): void {
  describe(`@DistributedLock over HTTP (${adapter})`, () => {
    const h = useHttpLockSuite(adapter);

    describeOneLockPerCoupon(h);
    describeRouteMetadata(h);
    describeKeysFromArguments(h);
    describeInvalidKeys(h);
    describeEncodedUserValues(h);
    describeObservableHandlers(h);
    describeHandlerErrors(h);
    describeRedisUnreachable(h);
    describeErrorMapping(h);
    describeStartupErrors();
  });
}
