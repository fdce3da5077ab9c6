import type { LockBackendHealth } from '../backend-health.js';

/** The probe of `MemoryLockBackend`: the store is the object itself, up until closed. */
export function probeMemory(closed: boolean): Promise<LockBackendHealth> {
  return Promise.resolve(
    closed
      ? {
          up: false,
          store: 'memory',
          nodes: [],
          message: 'the backend is closed',
        }
      : { up: true, store: 'memory', latencyMs: 0, nodes: [] },
  );
}
