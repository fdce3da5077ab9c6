import { Controller, Get, HttpStatus, Inject, Res } from '@nestjs/common';
import { sql } from 'kysely';
import { LockService } from '@app/distributed-lock';
import { APP_CONFIG, type AppConfig } from '../config/app-config.js';
import { DATABASE } from '../database/database.module.js';
import type { Db } from '../database/database.types.js';
import { REDIS_CLIENT, type RedisClient } from '../redis/redis-client.js';

type Status = 'up' | 'down';

export interface HealthBody {
  readonly ok: boolean;
  readonly redis: Status;
  readonly database: Status;
  /**
   * This instance's lock session id, the prefix of the tokens of the locks it
   * holds (`<id>.<random>`), so that an operator or a test can tell which
   * instance holds a coupon's lock; null while none is open (before its
   * first lock).
   */
  readonly lockSession: string | null;
}

/**
 * `GET /health`: 200 when Redis and the database both answer, else 503 saying
 * which is down; both with the instance's lock session.
 */
@Controller('health')
export class HealthController {
  constructor(
    @Inject(REDIS_CLIENT) private readonly redis: RedisClient,
    @Inject(DATABASE) private readonly db: Db,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly locks: LockService,
  ) {}

  @Get()
  async check(
    @Res({ passthrough: true }) response: { status(code: number): unknown },
  ): Promise<HealthBody> {
    const [redis, database] = await Promise.all([
      this.probe(() => this.redis.ping()),
      this.probe(() => sql`select 1`.execute(this.db)),
    ]);
    const ok = redis === 'up' && database === 'up';
    response.status(ok ? HttpStatus.OK : HttpStatus.SERVICE_UNAVAILABLE);
    return {
      ok,
      redis,
      database,
      lockSession: this.locks.sessionId ?? null,
    };
  }

  /** 'up' when `call` succeeds within the backend timeout. */
  private async probe(call: () => Promise<unknown>): Promise<Status> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<Status>((resolve) => {
      timer = setTimeout(() => resolve('down'), this.config.backendTimeout);
    });
    try {
      return await Promise.race([
        call().then(
          () => 'up' as const,
          () => 'down' as const,
        ),
        timeout,
      ]);
    } finally {
      clearTimeout(timer);
    }
  }
}
