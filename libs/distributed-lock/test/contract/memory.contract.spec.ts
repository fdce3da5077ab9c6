import { MemoryLockBackend } from '../../src/backends/memory/memory-lock-backend.js';
import { describeBackendContract } from './backend-contract.js';

// A MemoryLockBackend is its own store: two instances never exclude each
// other. So every "process" here is the same instance (a fresh one per test),
// each with its own LockService; closing one process closes the store for all
// (capability `sharedInstance`).
let store: MemoryLockBackend | undefined;

describeBackendContract('MemoryLockBackend', {
  capabilities: {
    fifo: 'strict',
    unreachable: false,
    sharedInstance: true,
    sessions: true,
  },
  async open(count) {
    const shared = (store ??= new MemoryLockBackend());
    return {
      backends: Array.from({ length: count }, () => shared),
      close: () => shared.close(),
    };
  },
  async reset() {
    store = undefined;
  },
});
