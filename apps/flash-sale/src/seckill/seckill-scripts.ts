import { readFileSync } from 'node:fs';
import { buyersKey, stockKey } from '../coupon/stock-cache.js';
import type { RedisClient } from '../redis/redis-client.js';

/** What seckill.lua answers for one user. */
export const BuyResult = {
  Bought: 1,
  SoldOut: 0,
  AlreadyBought: -1,
} as const;
export type BuyResult = (typeof BuyResult)[keyof typeof BuyResult];

/** seckill.lua's answer when Redis does not have the coupon's stock. */
const NOT_LOADED = -2;

// Read once, next to this module (the build copies the .lua files along).
const readScript = (file: string) =>
  readFileSync(new URL(`./${file}`, import.meta.url), 'utf8');
const BUY_LUA = readScript('seckill.lua');
const UNDO_LUA = readScript('undo.lua');

type ScriptCommand = (
  stock: string,
  buyers: string,
  ...userIds: string[]
) => Promise<unknown>;

export interface SeckillScripts {
  /**
   * Runs seckill.lua: for each of `userIds` (distinct), in order, checks and
   * takes one unit, all in one atomic step. Resolves one answer per user, or
   * `'not-loaded'` when Redis does not have the coupon (nothing was taken).
   */
  buy(
    couponId: number,
    userIds: readonly string[],
  ): Promise<BuyResult[] | 'not-loaded'>;
  /** Runs undo.lua: gives the users' units back and forgets them as buyers. Resolves how many were undone. */
  undo(couponId: number, userIds: readonly string[]): Promise<number>;
}

/**
 * Registers both scripts on the client with `defineCommand` (once per client).
 * ioredis then runs them by EVALSHA, sending the text only after a NOSCRIPT.
 */
export function defineSeckillScripts(redis: RedisClient): SeckillScripts {
  const commands = redis as unknown as Record<
    string,
    ScriptCommand | undefined
  >;
  if (typeof commands.seckillBuy !== 'function') {
    redis.defineCommand('seckillBuy', { numberOfKeys: 2, lua: BUY_LUA });
  }
  if (typeof commands.seckillUndo !== 'function') {
    redis.defineCommand('seckillUndo', { numberOfKeys: 2, lua: UNDO_LUA });
  }
  const buy = commands.seckillBuy!.bind(redis);
  const undo = commands.seckillUndo!.bind(redis);
  return {
    buy: async (couponId, userIds) => {
      const answer = await buy(
        stockKey(couponId),
        buyersKey(couponId),
        ...userIds,
      );
      if (answer === NOT_LOADED) return 'not-loaded';
      return (answer as number[]).map((code) => Number(code) as BuyResult);
    },
    undo: async (couponId, userIds) =>
      userIds.length === 0
        ? 0
        : Number(
            await undo(stockKey(couponId), buyersKey(couponId), ...userIds),
          ),
  };
}
