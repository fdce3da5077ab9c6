import {
  oursDecorator,
  oursQuorum,
  oursService,
  oursServiceFenced,
  oursServiceLease,
} from './ours.js';
import {
  redlock4Default,
  redlock4Tuned,
  redlock5Default,
  redlock5Tuned,
  semaphoreMutex,
  semaphoreRedlockMutex,
  sesameDefault,
  sesameTuned,
} from './peers.js';
import { rawBaseline, rawQuorumBaseline } from './raw.js';
import type { Contender } from './types.js';

export type { Contender } from './types.js';

/** Every contender by id (workers look them up by it). */
export const contenders: ReadonlyMap<string, Contender> = new Map(
  [
    rawBaseline,
    rawQuorumBaseline,
    oursService,
    oursServiceLease,
    oursServiceFenced,
    oursDecorator,
    oursQuorum,
    redlock4Default,
    redlock4Tuned,
    redlock5Default,
    redlock5Tuned,
    sesameDefault,
    sesameTuned,
    semaphoreMutex,
    semaphoreRedlockMutex,
  ].map((c) => [c.id, c]),
);

export function contender(id: string): Contender {
  const found = contenders.get(id);
  if (!found) throw new Error(`Unknown contender "${id}"`);
  return found;
}

/** Uncontended scenarios (A, B): retries never happen, so the tuned variants would repeat the defaults. */
export const uncontendedIds = [
  'raw',
  'ours-service',
  'ours-service-lease',
  'ours-service-fenced',
  'ours-decorator',
  'redlock4',
  'redlock5',
  'sesame',
  'semaphore-mutex',
  'semaphore-redlock-mutex',
];

/** Contention (C): defaults and 10 ms retries. */
export const contentionIds = [
  'raw',
  'ours-service',
  'ours-decorator',
  'redlock4',
  'redlock4-10ms',
  'redlock5',
  'redlock5-10ms',
  'sesame',
  'sesame-10ms',
  'semaphore-mutex',
  'semaphore-redlock-mutex',
];

/** Quorum (D): ours and the peers' Redlock modes. */
export const quorumIds = [
  'raw-quorum',
  'ours-quorum',
  'redlock4',
  'redlock5',
  'sesame',
  'semaphore-redlock-mutex',
];
