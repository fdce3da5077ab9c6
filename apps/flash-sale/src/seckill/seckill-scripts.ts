import { readFileSync } from 'node:fs';
import { buyersKey, stockKey } from '../coupon/stock-cache.js';
import type { RedisClient } from '../redis/redis-client.js';

/** What seckill.lua answers. */
export const BuyResult = {
  Bought: 1,
  SoldOut: 0,
  AlreadyBought: -1,
  NotLoaded: -2,
} as const;
export type BuyResult = (typeof BuyResult)[keyof typeof BuyResult];

// Read once, next to this module (the build copies the .lua files along).
const readScript = (file: string) =>
  readFileSync(new URL(`./${file}`, import.meta.url), 'utf8');
const BUY_LUA = readScript('seckill.lua');
const UNDO_LUA = readScript('undo.lua');

type ScriptCommand = (
  stock: string,
  buyers: string,
  userId: string,
) => Promise<number>;

export interface SeckillScripts {
  /** Runs seckill.lua: check and take one unit for the user, atomically. */
  buy(couponId: number, userId: string): Promise<BuyResult>;
  /** Runs undo.lua: give the unit back and forget the buyer. Resolves whether anything was undone. */
  undo(couponId: number, userId: string): Promise<boolean>;
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
    buy: async (couponId, userId) =>
      Number(
        await buy(stockKey(couponId), buyersKey(couponId), userId),
      ) as BuyResult,
    undo: async (couponId, userId) =>
      Number(await undo(stockKey(couponId), buyersKey(couponId), userId)) === 1,
  };
}
