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
  type LockSignalSource,
  type OnBusy,
} from './decorator/distributed-lock.decorator.js';
export {
  DistributedLockInterceptor,
  type LockErrorBody,
} from './interceptor/distributed-lock.interceptor.js';

export { encodeKeyPart, type LockKeySource } from './key-template/index.js';

export type {
  LockMetricsOptions,
  LockTracingOptions,
  MetricsRegistry,
} from './telemetry/telemetry-options.js';

export {
  LockHealthIndicator,
  type LockHealthDetails,
  type LockHealthOptions,
  type LockHealthResult,
} from './health/lock-health.indicator.js';
export type {
  LockBackendHealth,
  LockNodeHealth,
  LockStoreKind,
} from './backends/backend-health.js';
export type {
  LockSessionHealth,
  LockSessionState,
} from './session/session-health.js';

export {
  LockBackendError,
  LockError,
  LockKeyError,
  LockLostError,
  LockNotAcquiredError,
  LockTemplateError,
  LockUnsupportedError,
  type LockPrimitive,
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

export { SemaphoreService } from './semaphore/semaphore.service.js';
export type {
  SemaphoreOptions,
  SemaphoreServiceSettings,
} from './semaphore/semaphore.service.js';
export { SemaphoreHandle } from './semaphore/semaphore-handle.js';
export {
  DistributedSemaphore,
  DISTRIBUTED_SEMAPHORE_METADATA,
  type DistributedSemaphoreOptions,
} from './semaphore/distributed-semaphore.decorator.js';
export {
  SemaphoreLimitMismatchError,
  SemaphoreNotAcquiredError,
} from './semaphore/semaphore-errors.js';
export type {
  SemaphoreBackend,
  SemaphoreBusy,
  SemaphoreGrant,
  SemaphoreRequest,
} from './semaphore/semaphore-backend.js';
export {
  RedisSemaphoreBackend,
  type RedisSemaphoreBackendOptions,
} from './semaphore/redis/redis-semaphore-backend.js';
export { MemorySemaphoreBackend } from './semaphore/memory/memory-semaphore-backend.js';

export {
  ReadWriteLockService,
  MAX_READERS,
  type ReadWriteLockOptions,
  type ReadWriteLockServiceSettings,
} from './rwlock/read-write-lock.service.js';
export { ReadWriteLockHandle } from './rwlock/read-write-lock-handle.js';
export { currentReadWriteLock } from './rwlock/rwlock-scope.js';
export {
  ReadLock,
  WriteLock,
  READ_WRITE_LOCK_METADATA,
  type ReadWriteLockDecoratorOptions,
} from './rwlock/read-write-lock.decorators.js';
export {
  LockUpgradeError,
  ReadWriteLockNotAcquiredError,
  type ReadWriteLockMode,
} from './rwlock/rwlock-errors.js';
