import { PATH_METADATA } from '@nestjs/common/constants.js';
import type { DistributedLockOptions } from './decorated-lock.js';

/**
 * Where `@nestjs/microservices` (optional here) records a handler's kind;
 * 1 is `@MessagePattern`, whose caller waits for the answer.
 */
const patternHandlerMetadata = 'microservices:handler_type';
const messageHandler = 1;

/**
 * Rejects `onBusy: 'skip'` on a handler whose caller waits for its answer:
 * a busy lock would answer an HTTP request 200 (or a message `undefined`),
 * as if it had run. Checked at bootstrap, when the route decorators are all
 * applied, whichever side of `@DistributedLock` they are on.
 *
 * @throws TypeError naming the handler and what to use instead
 */
export function assertSkipFits(
  handler: object,
  options: DistributedLockOptions,
  label: string,
): void {
  if (options.onBusy !== 'skip') return;
  const kind = Reflect.hasOwnMetadata(PATH_METADATA, handler)
    ? 'an HTTP route'
    : Reflect.getOwnMetadata(patternHandlerMetadata, handler) === messageHandler
      ? 'a @MessagePattern handler'
      : undefined;
  if (kind === undefined) return;
  throw new TypeError(
    `@DistributedLock on ${label}: onBusy: 'skip' does not fit ${kind}, whose caller would get an ` +
      `empty success while the method did not run. Leave onBusy as 'throw' (the interceptor ` +
      `answers 409 with Retry-After), or move the work to a provider method.`,
  );
}
