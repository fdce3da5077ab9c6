import {
  Inject,
  Injectable,
  Logger,
  type OnApplicationShutdown,
  type OnModuleInit,
} from '@nestjs/common';
import { DiscoveryService, MetadataScanner } from '@nestjs/core';
import {
  bindLockService,
  fallbackLockService,
  setFallbackLockService,
} from '../decorator/lock-binding.js';
import {
  DISTRIBUTED_LOCK_METADATA,
  type DistributedLockMetadata,
} from '../decorator/distributed-lock.decorator.js';
import { assertSkipFits } from '../decorator/skip-fit-check.js';
import { loadRpcException } from '../interceptor/distributed-lock.interceptor.js';
import type { LockPrimitive } from '../errors/lock-errors.js';
import { LockService } from '../lock-service/lock.service.js';
import { READ_WRITE_LOCK_METADATA } from '../rwlock/read-write-lock.decorators.js';
import { DISTRIBUTED_SEMAPHORE_METADATA } from '../semaphore/distributed-semaphore.decorator.js';
import {
  missingSemaphoreStore,
  unsupportedError,
} from '../semaphore/semaphore-wiring.js';
import { DISTRIBUTED_LOCK_OPTIONS } from './distributed-lock.module-definition.js';
import type { DistributedLockModuleOptions } from './distributed-lock.options.js';

/** Metadata of the decorators that need a semaphore store, by primitive. */
const SEMAPHORE_STORE_DECORATORS: readonly [string, LockPrimitive][] = [
  [DISTRIBUTED_SEMAPHORE_METADATA, 'semaphore'],
  [READ_WRITE_LOCK_METADATA, 'read-write lock'],
];

/**
 * At bootstrap, finds every controller and provider with `@DistributedLock`
 * methods and binds it to this app's LockService (as `@nestjs/schedule` finds
 * its decorated methods). Fails the startup with `LockUnsupportedError` when
 * a `@DistributedSemaphore`, `@ReadLock` or `@WriteLock` method exists but
 * the module has no semaphore store (quorum or custom backend): every call
 * of it would fail.
 */
@Injectable()
export class LockExplorer implements OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger('DistributedLock');

  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly locks: LockService,
    @Inject(DISTRIBUTED_LOCK_OPTIONS)
    private readonly options: DistributedLockModuleOptions,
  ) {}

  async onModuleInit(): Promise<void> {
    await loadRpcException();
    let methods = 0;
    for (const wrapper of [
      ...this.discovery.getControllers(),
      ...this.discovery.getProviders(),
    ]) {
      const instance: unknown = wrapper.instance;
      if (typeof instance !== 'object' || instance === null) continue;
      const prototype = Object.getPrototypeOf(instance) as object | null;
      if (!prototype) continue;
      this.assertSemaphoreStoreFor(prototype);
      const decorated = this.scanner
        .getAllMethodNames(prototype)
        .filter((name) =>
          Reflect.hasMetadata(
            DISTRIBUTED_LOCK_METADATA,
            (prototype as Record<string, object>)[name],
          ),
        );
      if (decorated.length === 0) continue;
      for (const name of decorated) {
        const handler = (prototype as Record<string, object>)[name];
        const { options } = Reflect.getMetadata(
          DISTRIBUTED_LOCK_METADATA,
          handler,
        ) as DistributedLockMetadata;
        assertSkipFits(
          handler,
          options,
          `${prototype.constructor.name}.${name}`,
        );
      }
      bindLockService(instance, this.locks);
      methods += decorated.length;
    }
    setFallbackLockService(this.locks);
    this.logger.log(`Guarding ${methods} method(s) with distributed locks`);
  }

  private assertSemaphoreStoreFor(prototype: object): void {
    const why = missingSemaphoreStore(this.options, this.locks);
    if (why === undefined) return;
    for (const name of this.scanner.getAllMethodNames(prototype)) {
      const method = (prototype as Record<string, object>)[name];
      for (const [metadataKey, primitive] of SEMAPHORE_STORE_DECORATORS) {
        if (!Reflect.hasMetadata(metadataKey, method)) continue;
        throw unsupportedError(
          primitive,
          why,
          `${prototype.constructor.name}.${name}`,
        );
      }
    }
  }

  onApplicationShutdown(): void {
    if (fallbackLockService() === this.locks) setFallbackLockService(undefined);
  }
}
