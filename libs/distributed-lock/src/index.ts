export { DistributedLockModule } from './module/distributed-lock.module.js';
export { DISTRIBUTED_LOCK_OPTIONS } from './module/distributed-lock.module-definition.js';
export type {
  DistributedLockModuleExtras,
  DistributedLockModuleOptions,
  LockErrorStatuses,
} from './module/distributed-lock.options.js';

export {
  LockService,
  isLockError,
  type LockOptions,
} from './lock-service/lock.service.js';
export { LockHandle } from './lock-service/lock-handle.js';
export { currentLock } from './lock-service/lock-scope.js';
export type {
  LockEventMap,
  LockLostEvent,
  LockLostReason,
} from './lock-service/lock-events.js';

export {
  DistributedLock,
  DISTRIBUTED_LOCK_METADATA,
  type DistributedLockOptions,
} from './decorator/distributed-lock.decorator.js';
export {
  DistributedLockInterceptor,
  type LockErrorBody,
} from './interceptor/distributed-lock.interceptor.js';

export { encodeKeyPart, type LockKeySource } from './key-template/index.js';

export {
  LockBackendError,
  LockError,
  LockKeyError,
  LockLostError,
  LockNotAcquiredError,
  LockTemplateError,
} from './errors/lock-errors.js';

export type {
  AcquireRequest,
  LockBackend,
  LockBusy,
  LockGrant,
} from './backends/lock-backend.js';
export {
  RedisLockBackend,
  type RedisLockBackendOptions,
} from './backends/redis/redis-lock-backend.js';
export { MemoryLockBackend } from './backends/memory/memory-lock-backend.js';
export { QuorumLockBackend } from './backends/quorum/quorum-lock-backend.js';
export type { QuorumLockBackendOptions } from './backends/quorum/quorum-options.js';
