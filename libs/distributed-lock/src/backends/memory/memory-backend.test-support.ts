// Shared by the memory backend spec files. The .mts extension keeps it out of
// the library build: tsconfig.lib.json compiles src/**/*.ts minus *.spec.ts, and
// a test helper must neither ship in dist nor be type-checked without vitest's globals.
import type { AcquireRequest, LockBusy, LockGrant } from '../lock-backend.js';

export function request(
  key: string,
  token: string,
  overrides: Partial<AcquireRequest> = {},
): AcquireRequest {
  return { key, token, leaseMs: 10_000, waitMs: 0, ...overrides };
}

/** Records the outcome of a promise so a test can look at it without awaiting. */
export function track<T>(promise: Promise<T>): { done: boolean; value?: T } {
  const state: { done: boolean; value?: T } = { done: false };
  void promise.then((value) => {
    state.done = true;
    state.value = value;
  });
  return state;
}

export function expectGrant(
  result: LockGrant | LockBusy | undefined,
): LockGrant {
  expect(result?.acquired).toBe(true);
  return result as LockGrant;
}

/** Lets pending promise callbacks run while timers are faked. */
export async function flush(): Promise<void> {
  await vi.advanceTimersByTimeAsync(0);
}
