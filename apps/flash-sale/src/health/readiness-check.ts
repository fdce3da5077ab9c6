import {
  Inject,
  Injectable,
  ServiceUnavailableException,
} from '@nestjs/common';
import {
  HealthCheckService,
  HealthIndicatorService,
  type HealthCheckResult,
} from '@nestjs/terminus';
import { sql } from 'kysely';
import { LockHealthIndicator } from '@app/distributed-lock';
import { APP_CONFIG, type AppConfig } from '../config/app-config.js';
import { DATABASE } from '../database/database.module.js';
import type { Db } from '../database/database.types.js';

/**
 * Whether this instance can serve purchases: the lock store (the app's
 * Redis, which also keeps the stock) and the database both answer within
 * the backend timeout, and the instance's lock session is alive. One
 * terminus check, reported as `lock` and `database`.
 */
@Injectable()
export class ReadinessCheck {
  constructor(
    private readonly health: HealthCheckService,
    private readonly indicators: HealthIndicatorService,
    private readonly lockHealth: LockHealthIndicator,
    @Inject(DATABASE) private readonly db: Db,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  /**
   * Terminus's result, whether up or down (terminus rejects with a 503
   * carrying it when anything is down).
   */
  async result(): Promise<HealthCheckResult> {
    try {
      return await this.run();
    } catch (error) {
      if (error instanceof ServiceUnavailableException)
        return error.getResponse() as HealthCheckResult;
      throw error;
    }
  }

  private run(): Promise<HealthCheckResult> {
    return this.health.check([
      () => this.lockHealth.isHealthy('lock'),
      () =>
        this.indicators
          .check('database')
          .attempt(async () => {
            // Its rows would become details of the check: answered is enough.
            await sql`select 1`.execute(this.db);
          })
          .withTimeout(this.config.backendTimeout),
    ]);
  }
}
