/**
 * Set-up of the health indicator's specs: an application with
 * `DistributedLockModule` and a real `@nestjs/terminus` `TerminusModule`,
 * and one health check run through terminus's `HealthCheckService`, as a
 * controller would run it.
 */
import { ServiceUnavailableException } from '@nestjs/common';
import {
  HealthCheckService,
  TerminusModule,
  type HealthCheckResult,
} from '@nestjs/terminus';
import { Test, type TestingModule } from '@nestjs/testing';
import {
  DistributedLockModule,
  LockHealthIndicator,
  LockService,
  type DistributedLockModuleOptions,
  type LockHealthDetails,
  type LockHealthOptions,
} from '@app/distributed-lock';

/** An application with the lock module and terminus. */
export interface HealthApp {
  readonly app: TestingModule;
  readonly locks: LockService;
  /** Runs one check of the lock indicator through terminus. */
  check(options?: LockHealthOptions): Promise<CheckOutcome>;
  close(): Promise<void>;
}

/** How one terminus check came out. */
export interface CheckOutcome {
  /** The HTTP status a `@HealthCheck()` route answers with. */
  readonly httpStatus: 200 | 503;
  readonly result: HealthCheckResult;
  /** `details.lock`. */
  readonly lock: LockHealthDetails;
  readonly elapsedMs: number;
}

/** Opens an application with `options`; close it after the test. */
export async function openHealthApp(
  options: DistributedLockModuleOptions,
): Promise<HealthApp> {
  const app = await Test.createTestingModule({
    imports: [
      TerminusModule.forRoot({ logger: false }),
      DistributedLockModule.forRoot(options),
    ],
  }).compile();
  await app.init();
  const health = app.get(HealthCheckService);
  const indicator = app.get(LockHealthIndicator);
  return {
    app,
    locks: app.get(LockService),
    check: async (checkOptions) => {
      const startedAt = performance.now();
      let httpStatus: 200 | 503 = 200;
      let result: HealthCheckResult;
      try {
        result = await health.check([
          () => indicator.isHealthy('lock', checkOptions),
        ]);
      } catch (error) {
        if (!(error instanceof ServiceUnavailableException)) throw error;
        httpStatus = 503;
        result = error.getResponse() as HealthCheckResult;
      }
      return {
        httpStatus,
        result,
        lock: result.details.lock as unknown as LockHealthDetails,
        elapsedMs: performance.now() - startedAt,
      };
    },
    close: () => app.close(),
  };
}

/** Tracks the applications a spec opened, to close them after each test. */
export function useHealthApps(): (
  options: DistributedLockModuleOptions,
) => Promise<HealthApp> {
  const opened: HealthApp[] = [];
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((app) => app.close()));
  });
  return async (options) => {
    const app = await openHealthApp(options);
    opened.push(app);
    return app;
  };
}
