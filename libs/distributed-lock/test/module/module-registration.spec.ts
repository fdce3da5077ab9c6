/**
 * DistributedLockModule.forRoot and forRootAsync: the LockService they give,
 * the key prefix, and isGlobal for feature modules that do not import it.
 */
import { Injectable, Module } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import {
  DistributedLockModule,
  LockService,
  MemoryLockBackend,
} from '@app/distributed-lock';
import { useModuleServer } from './module-server-fixture.js';

const fixture = useModuleServer();
const { start } = fixture;

/** Stands for a configuration module (like @nestjs/config) exporting a token. */
const APP_CONFIG = Symbol('APP_CONFIG');
interface AppConfig {
  readonly url: string;
}

@Module({
  providers: [
    {
      provide: APP_CONFIG,
      useFactory: async (): Promise<AppConfig> => ({ url: fixture.server.url }),
    },
  ],
  exports: [APP_CONFIG],
})
// oxlint-disable-next-line typescript/no-extraneous-class -- a Nest module
class ConfigLikeModule {}

@Injectable()
class FeatureService {
  constructor(readonly locks: LockService) {}
}

/** A feature module that injects LockService without importing DistributedLockModule. */
@Module({ providers: [FeatureService], exports: [FeatureService] })
// oxlint-disable-next-line typescript/no-extraneous-class -- a Nest module
class FeatureModule {}

describe('forRoot / forRootAsync', () => {
  it('forRoot({ redis: url }) gives a LockService storing keys as lock:{key}', async () => {
    const app = await start({
      imports: [DistributedLockModule.forRoot({ redis: fixture.server.url })],
    });
    const locks = app.get(LockService);

    const handle = await locks.acquire('order:1');
    expect(await fixture.observer.exists('lock:{order:1}')).toBe(1);
    expect(await locks.isLocked('order:1')).toBe(true);
    expect(await handle.release()).toBe(true);
    expect(await fixture.observer.exists('lock:{order:1}')).toBe(0);
  });

  it('forRootAsync reads the URL from an injected config provider', async () => {
    const app = await start({
      imports: [
        DistributedLockModule.forRootAsync({
          imports: [ConfigLikeModule],
          inject: [APP_CONFIG],
          useFactory: (config: AppConfig) => ({ redis: config.url }),
        }),
      ],
    });
    const locks = app.get(LockService);

    const handle = await locks.acquire('order:2');
    expect(await fixture.observer.exists('lock:{order:2}')).toBe(1);
    await handle.release();
    expect(await fixture.observer.exists('lock:{order:2}')).toBe(0);
  });

  it('keyPrefix changes the stored key', async () => {
    const app = await start({
      imports: [
        DistributedLockModule.forRoot({
          redis: fixture.server.url,
          keyPrefix: 'app:',
        }),
      ],
    });
    const locks = app.get(LockService);

    const handle = await locks.acquire('order:3');
    expect(await fixture.observer.exists('app:{order:3}')).toBe(1);
    expect(await fixture.observer.exists('lock:{order:3}')).toBe(0);
    await handle.release();
    expect(await fixture.observer.exists('app:{order:3}')).toBe(0);
  });
});

describe('isGlobal', () => {
  it('lets a feature module that does not import the module inject LockService', async () => {
    const app = await start({
      imports: [
        DistributedLockModule.forRoot({
          redis: fixture.server.url,
          isGlobal: true,
        }),
        FeatureModule,
      ],
    });
    const { locks } = app.get(FeatureService);
    expect(locks).toBe(app.get(LockService));

    const handle = await locks.acquire('feature:1');
    expect(await fixture.observer.exists('lock:{feature:1}')).toBe(1);
    await handle.release();
  });

  it('works with forRootAsync too', async () => {
    const app = await start({
      imports: [
        DistributedLockModule.forRootAsync({
          isGlobal: true,
          imports: [ConfigLikeModule],
          inject: [APP_CONFIG],
          useFactory: (config: AppConfig) => ({ redis: config.url }),
        }),
        FeatureModule,
      ],
    });
    expect(app.get(FeatureService).locks).toBe(app.get(LockService));
  });

  it('without isGlobal, such a feature module fails to compile', async () => {
    // The in-memory backend: the failed compile leaves no connection behind.
    const compiling = Test.createTestingModule({
      imports: [
        DistributedLockModule.forRoot({ backend: new MemoryLockBackend() }),
        FeatureModule,
      ],
    }).compile();
    await expect(compiling).rejects.toThrow(/FeatureService.*LockService/s);
  });
});
