import { MemorySemaphoreBackend } from '../../src/semaphore/memory/memory-semaphore-backend.js';
import { describeReadWriteLockContract } from './rwlock-contract.js';

// A memory store is its own process: every "process" shares one instance.
describeReadWriteLockContract('MemorySemaphoreBackend', {
  async open(count) {
    const shared = new MemorySemaphoreBackend();
    return {
      backends: Array.from({ length: count }, () => shared),
      close: () => shared.close(),
    };
  },
});
