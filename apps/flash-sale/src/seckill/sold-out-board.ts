import {
  Inject,
  Injectable,
  Logger,
  type OnApplicationShutdown,
  type OnModuleInit,
} from '@nestjs/common';
import { soldOut } from '../common/app-exception.js';
import { REDIS_CLIENT, type RedisClient } from '../redis/redis-client.js';

/** Where instances tell each other that a coupon sold out. */
export const SOLD_OUT_CHANNEL = 'flash-sale:sold-out';

/** More coupons than a sale has at once; past it the board starts afresh. */
const MAX_COUPONS = 10_000;

/**
 * Lets purchases queued for a coupon's lock stop waiting once the coupon sold
 * out, on every instance. Without it, the requests that passed the precheck
 * while units were left wait their turn one by one only to hear SOLD_OUT
 * (seconds under load: each turn is a hand-off between busy processes).
 *
 * Each waiting purchase gets the coupon's current signal (the lock
 * decorator's `signal` option); a purchase that finds the coupon sold out
 * aborts it here and publishes the news, and the other instances abort
 * theirs, with `soldOut()` as the reason, which the lock's error mapping
 * answers as 409 SOLD_OUT. It is the precheck's answer given again at the
 * moment stock reached zero, and as final as that one: a unit given back
 * afterwards (a sale whose database write failed) goes to a later request.
 */
@Injectable()
export class SoldOutBoard implements OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger('SoldOutBoard');
  private readonly waiting = new Map<number, AbortController>();
  private subscriber?: RedisClient;

  constructor(@Inject(REDIS_CLIENT) private readonly redis: RedisClient) {}

  async onModuleInit(): Promise<void> {
    // A client in subscriber mode serves nothing else: a connection of its own.
    const subscriber = (this.redis as { duplicate(): RedisClient }).duplicate();
    this.subscriber = subscriber;
    subscriber.on('error', () => undefined);
    subscriber.on('message', (_channel: string, message: string) =>
      this.abortLocal(Number(message)),
    );
    // Without the subscription a waiter takes its turn as before: not fatal.
    await subscriber.subscribe(SOLD_OUT_CHANNEL).catch((error: Error) => {
      this.logger.warn(
        `Not subscribed to ${SOLD_OUT_CHANNEL} (${error.message}); waiting purchases hear of a sell-out at their turn`,
      );
    });
  }

  async onApplicationShutdown(): Promise<void> {
    this.subscriber?.disconnect();
    this.subscriber = undefined;
  }

  /** The signal a purchase of the coupon waits with: aborted when it sells out. */
  signalFor(couponId: number): AbortSignal {
    let controller = this.waiting.get(couponId);
    if (!controller || controller.signal.aborted) {
      if (this.waiting.size >= MAX_COUPONS) this.waiting.clear();
      controller = new AbortController();
      this.waiting.set(couponId, controller);
    }
    return controller.signal;
  }

  /**
   * The coupon is sold out: its waiting purchases here and on the other
   * instances stop. Publishes only when some purchase here was given the
   * current signal, so a stream of sold-out answers publishes once.
   */
  announce(couponId: number): void {
    if (!this.abortLocal(couponId)) return;
    this.redis
      .publish(SOLD_OUT_CHANNEL, String(couponId))
      .catch((error: Error) =>
        this.logger.debug(`Could not publish a sell-out: ${error.message}`),
      );
  }

  /** Aborts the coupon's current signal here; false when there was none to abort. */
  private abortLocal(couponId: number): boolean {
    const controller = this.waiting.get(couponId);
    if (!controller || controller.signal.aborted) return false;
    this.waiting.delete(couponId);
    controller.abort(soldOut());
    return true;
  }
}
