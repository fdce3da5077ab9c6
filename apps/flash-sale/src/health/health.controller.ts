import { Controller, Get, HttpStatus, Res } from '@nestjs/common';
import { HealthCheck, type HealthCheckResult } from '@nestjs/terminus';
import { LockService } from '@app/distributed-lock';
import { ReadinessCheck } from './readiness-check.js';

type Status = 'up' | 'down';

export interface HealthBody {
  readonly ok: boolean;
  /** The lock store on the app's Redis (see `details.lock` of `/health/ready`). */
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
 * `GET /health/ready`: the readiness check, terminus's body (`status`,
 * `info`, `error`, `details`), 200 or 503. `GET /health`: the same check in
 * short, with the instance's lock session.
 */
@Controller('health')
export class HealthController {
  constructor(
    private readonly readiness: ReadinessCheck,
    private readonly locks: LockService,
  ) {}

  /** 200 when Redis and the database both answer, else 503 saying which is down. */
  @Get()
  async check(
    @Res({ passthrough: true }) response: { status(code: number): unknown },
  ): Promise<HealthBody> {
    const result = await this.readiness.result();
    const ok = result.status === 'ok';
    response.status(ok ? HttpStatus.OK : HttpStatus.SERVICE_UNAVAILABLE);
    return {
      ok,
      redis: statusOf(result, 'lock'),
      database: statusOf(result, 'database'),
      lockSession: this.locks.sessionId ?? null,
    };
  }

  /**
   * Answers with the status itself: the app's exception filter would turn
   * terminus's 503 into the app's error shape, without the details.
   */
  @Get('ready')
  @HealthCheck()
  async ready(
    @Res({ passthrough: true }) response: { status(code: number): unknown },
  ): Promise<HealthCheckResult> {
    const result = await this.readiness.result();
    const up = result.status === 'ok' || result.status === 'degraded';
    response.status(up ? HttpStatus.OK : HttpStatus.SERVICE_UNAVAILABLE);
    return result;
  }
}

function statusOf(result: HealthCheckResult, key: string): Status {
  return result.details[key]?.status === 'up' ? 'up' : 'down';
}
