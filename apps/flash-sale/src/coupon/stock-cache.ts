import { randomBytes } from 'node:crypto';
import { Inject, Injectable } from '@nestjs/common';
import { Cluster } from 'ioredis';
import { REDIS_CLIENT, type RedisClient } from '../redis/redis-client.js';

// A coupon's keys share the hash tag `{coupon:<id>}`, so that on a Redis
// Cluster they are in one slot: seckill.lua, undo.lua and the MULTIs of
// `replace` (with its temporary key, built on buyersKey) use them together.

/** Remaining stock of a coupon in Redis. */
export const stockKey = (couponId: number) =>
  `seckill:{coupon:${couponId}}:stock`;
/** The set of users who bought the coupon. */
export const buyersKey = (couponId: number) =>
  `seckill:{coupon:${couponId}}:buyers`;

const SADD_CHUNK = 1_000;
const MEMBER_CHECK_CHUNK = 1_000;
const REBUILD_TTL_SECONDS = 600;

/** The Redis side of a coupon's stock: what is left and who bought. */
@Injectable()
export class StockCache {
  constructor(@Inject(REDIS_CLIENT) private readonly redis: RedisClient) {}

  /** Remaining stock per coupon, `undefined` where Redis has none loaded. */
  async remaining(couponIds: number[]): Promise<(number | undefined)[]> {
    if (couponIds.length === 0) return [];
    const keys = couponIds.map(stockKey);
    // Different coupons are in different slots of a cluster, where one MGET
    // cannot span them: one GET each there (sent to their nodes at once).
    const values =
      this.redis instanceof Cluster
        ? await Promise.all(keys.map((key) => this.redis.get(key)))
        : await this.redis.mget(keys);
    return values.map((value) => (value === null ? undefined : Number(value)));
  }

  /** Whether `userId` is recorded as a buyer of the coupon. */
  async isBuyer(couponId: number, userId: string): Promise<boolean> {
    return (await this.redis.sismember(buyersKey(couponId), userId)) === 1;
  }

  /**
   * How many of `userIds` Redis does not record as buyers of the coupon.
   * SISMEMBER in pipelined chunks rather than SMISMEMBER, which Redis 6.0
   * lacks; on a cluster one chunk goes to the key's node.
   */
  async countMissingBuyers(
    couponId: number,
    userIds: readonly string[],
  ): Promise<number> {
    let missing = 0;
    for (let start = 0; start < userIds.length; start += MEMBER_CHECK_CHUNK) {
      const pipeline = this.redis.pipeline();
      for (const userId of userIds.slice(start, start + MEMBER_CHECK_CHUNK)) {
        pipeline.sismember(buyersKey(couponId), userId);
      }
      const results = await pipeline.exec();
      if (!results) throw new Error('Redis discarded the buyer check');
      for (const [error, isMember] of results) {
        if (error) throw error;
        if (isMember === 0) missing++;
      }
    }
    return missing;
  }

  /** What Redis holds for the coupon: remaining stock (undefined when not loaded) and buyers counted. */
  async snapshot(
    couponId: number,
  ): Promise<{ remaining: number | undefined; buyers: number }> {
    const [remaining, buyers] = await Promise.all([
      this.redis.get(stockKey(couponId)),
      this.redis.scard(buyersKey(couponId)),
    ]);
    return {
      remaining: remaining === null ? undefined : Number(remaining),
      buyers,
    };
  }

  /**
   * Replaces the coupon's Redis state with the database's: the buyers are
   * exactly `buyerPages`, the remaining stock is `remaining` as given (below
   * zero if the database holds more orders than stock: seckill.lua then sells
   * nothing, and the figure shows the excess rather than hiding it). The new
   * set is built under a temporary key and swapped in together with the
   * stock in one MULTI, so readers never see half of it. Call it holding the
   * coupon's lock.
   */
  async replace(
    couponId: number,
    remaining: number,
    buyerPages: AsyncIterable<string[]>,
  ): Promise<{ buyers: number }> {
    const temporary = `${buyersKey(couponId)}:rebuild:${randomBytes(6).toString('hex')}`;
    let buyers = 0;
    let swapped = false;
    try {
      for await (const page of buyerPages) {
        for (let start = 0; start < page.length; start += SADD_CHUNK) {
          const chunk = page.slice(start, start + SADD_CHUNK);
          await this.redis
            .multi()
            .sadd(temporary, ...chunk)
            .expire(temporary, REBUILD_TTL_SECONDS)
            .exec();
          buyers += chunk.length;
        }
      }
      const swap = this.redis.multi();
      if (buyers > 0) {
        swap.rename(temporary, buyersKey(couponId));
        swap.persist(buyersKey(couponId));
      } else {
        swap.del(buyersKey(couponId));
      }
      swap.set(stockKey(couponId), remaining);
      const results = await swap.exec();
      const failed = results?.find(([error]) => error !== null)?.[0];
      if (results === null || failed) {
        throw failed ?? new Error('Redis discarded the stock update');
      }
      swapped = true;
      return { buyers };
    } finally {
      if (!swapped) await this.redis.del(temporary).catch(() => undefined);
    }
  }
}
