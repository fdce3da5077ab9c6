import 'reflect-metadata';
import { Injectable, Module, type DynamicModule } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import {
  DistributedLock,
  DistributedLockModule,
  LockService,
  type DistributedLockModuleOptions,
} from '@app/distributed-lock';
import { installedVersion } from './versions.js';
import type { Contender, ContenderInstance, HeldLock } from './types.js';

const ourVersion = `nest-distributed-lock (this repo) on ioredis ${installedVersion('ioredis')}, Nest ${installedVersion('@nestjs/core')}`;

/** Root module of the benchmark's application contexts (everything comes from forRoot). */
@Module({})
// oxlint-disable-next-line typescript/no-extraneous-class -- a Nest module
class BenchRootModule {}

/** A tiny Nest application context with the lock module, as an app would have it. */
export async function createContext(
  options: DistributedLockModuleOptions,
  providers: DynamicModule['providers'] = [],
) {
  const root: DynamicModule = {
    module: BenchRootModule,
    imports: [DistributedLockModule.forRoot(options)],
    providers,
  };
  return NestFactory.createApplicationContext(root, {
    logger: false,
    abortOnError: false,
  });
}

/**
 * Through `LockService.acquire()` / `handle.release()`; `fenced` also asks for
 * the fencing token of every hold, as code guarding a resource with it would.
 */
function serviceContender(
  id: string,
  label: string,
  perCallLease: boolean,
  fenced = false,
  quorum = false,
): Contender {
  return {
    id,
    label,
    detail: `${ourVersion}; ${quorum ? 'quorum mode (nodes: every URL); ' : ''}${perCallLease ? 'leaseTime = the benchmark TTL' : 'module defaults (watchdog lease)'}${fenced ? '; awaits handle.fence() once per hold' : ''}`,
    kind: 'ours',
    library: 'ours',
    create: ({ urls }) =>
      lockServiceOn(
        quorum ? { nodes: urls } : { redis: urls[0] },
        perCallLease,
        fenced,
      ),
  };
}

/**
 * `LockService.acquire()` / `handle.release()` in a context of its own with
 * the module `options` (e.g. H's Sentinel and Cluster deployments); see
 * {@link serviceContender} for `perCallLease` and `fenced`.
 */
export async function lockServiceOn(
  options: DistributedLockModuleOptions,
  perCallLease = false,
  fenced = false,
): Promise<ContenderInstance> {
  const app = await createContext(options);
  const locks = app.get(LockService);
  return {
    async acquire(key, { ttlMs, signal }): Promise<HeldLock> {
      const handle = await locks.acquire(key, {
        signal,
        ...(perCallLease ? { leaseTime: ttlMs } : {}),
      });
      if (fenced) await handle.fence();
      return {
        release: async () => {
          await handle.release();
        },
      };
    },
    close: () => app.close(),
  };
}

export const oursService = serviceContender(
  'ours-service',
  'ours: LockService',
  false,
);

export const oursServiceFenced = serviceContender(
  'ours-service-fenced',
  'ours: LockService + fence()',
  false,
  true,
);

/** Quorum (D): LockService over every node, explicit leases as the Redlock peers use. */
export const oursQuorum = serviceContender(
  'ours-quorum',
  'ours: LockService, quorum mode',
  true,
  false,
  true,
);

export const oursServiceLease = serviceContender(
  'ours-service-lease',
  'ours: LockService, explicit leaseTime',
  true,
);

/** Lets the benchmark decide, from outside, when a decorated method returns. */
interface Gate {
  enter(): void;
  readonly done: Promise<void>;
}

@Injectable()
class LockedWork {
  @DistributedLock('<0>')
  async hold(key: string, gate: Gate): Promise<void> {
    gate.enter();
    await gate.done;
  }
}

/**
 * Through `@DistributedLock('<0>')` on a provider method: "acquired" is the
 * moment the method body starts, "released" the moment the call resolves.
 */
export const oursDecorator: Contender = {
  id: 'ours-decorator',
  library: 'ours',
  label: 'ours: @DistributedLock',
  detail: `${ourVersion}; @DistributedLock('<0>') on a provider method, module defaults`,
  kind: 'ours',
  async create({ urls }): Promise<ContenderInstance> {
    const app = await createContext({ redis: urls[0] }, [LockedWork]);
    const work = app.get(LockedWork);
    return {
      acquire(key): Promise<HeldLock> {
        return new Promise<HeldLock>((resolve, reject) => {
          let open!: () => void;
          const done = new Promise<void>((r) => (open = r));
          let entered = false;
          const call = work.hold(key, {
            enter: () => {
              entered = true;
              resolve({
                release: () => {
                  open();
                  return call;
                },
              });
            },
            done,
          });
          call.catch((error: unknown) => {
            if (!entered) reject(error as Error);
          });
        });
      },
      close: () => app.close(),
    };
  },
};
