// Shared by the key-template spec files. The .mts extension keeps it out of the
// library build: tsconfig.lib.json compiles src/**/*.ts minus *.spec.ts, and a
// test helper must neither ship in dist nor be type-checked without vitest's globals.
import { LockKeyError } from '../errors/lock-errors.js';
import { compileLockKeys, type LockKeySource } from './index.js';

export const origin = { className: 'CouponController', methodName: 'buy' };

/** Runs `action`, which must throw, and returns what it threw. */
export function thrownBy(action: () => unknown): unknown {
  try {
    action();
  } catch (error) {
    return error;
  }
  throw new Error('expected the action to throw');
}

export function keyErrorFrom(
  source: LockKeySource | readonly LockKeySource[],
  args: readonly unknown[],
): LockKeyError {
  const error = thrownBy(() => compileLockKeys(source, origin).resolve(args));
  expect(error).toBeInstanceOf(LockKeyError);
  return error as LockKeyError;
}

/** Small seeded generator, so a failing random case can be replayed. */
export function randomGenerator(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
