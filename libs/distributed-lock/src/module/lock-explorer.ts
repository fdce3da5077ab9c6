import {
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
import { LockService } from '../lock-service/lock.service.js';

/**
 * At bootstrap, finds every controller and provider with `@DistributedLock`
 * methods and binds it to this app's LockService (as `@nestjs/schedule` finds
 * its decorated methods).
 */
@Injectable()
export class LockExplorer implements OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger('DistributedLock');

  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly locks: LockService,
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

  onApplicationShutdown(): void {
    if (fallbackLockService() === this.locks) setFallbackLockService(undefined);
  }
}
