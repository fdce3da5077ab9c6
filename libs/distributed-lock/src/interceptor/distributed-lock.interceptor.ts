import {
  HttpException,
  HttpStatus,
  Inject,
  Injectable,
  Optional,
  type CallHandler,
  type ExecutionContext,
  type NestInterceptor,
} from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { catchError, throwError, type Observable } from 'rxjs';
import {
  LockBackendError,
  LockError,
  LockKeyError,
  LockLostError,
  LockNotAcquiredError,
  LockUnsupportedError,
} from '../errors/lock-errors.js';
import { DISTRIBUTED_LOCK_OPTIONS } from '../module/distributed-lock.module-definition.js';
import type { DistributedLockModuleOptions } from '../module/distributed-lock.options.js';
import {
  resolveLockOptions,
  type ResolvedLockOptions,
} from '../module/resolve-lock-options.js';

/** JSON body of a lock failure answered over HTTP. */
export interface LockErrorBody {
  readonly statusCode: number;
  readonly error: string;
  readonly message: string;
  /** Machine-readable code, e.g. `LOCK_NOT_ACQUIRED`. */
  readonly code: string;
  /** The lock key, for busy and lost locks. */
  readonly key?: string;
}

/**
 * Turns lock failures into the transport's answer: over HTTP a JSON error with
 * 400 (bad key), 409 and `Retry-After` (busy), 503 and `Retry-After` (Redis
 * unreachable), 500 without `Retry-After` (a primitive the module's store
 * does not support, or a refused upgrade); over microservice transports an `RpcException` with the same body. Other errors
 * pass through untouched.
 *
 * The lock itself is taken by the `@DistributedLock` wrapper inside the
 * handler call, because only there are the arguments final: interceptors run
 * before pipes, and for HTTP their arguments are the raw request. The module
 * registers this interceptor globally.
 */
@Injectable()
export class DistributedLockInterceptor implements NestInterceptor {
  private readonly options: ResolvedLockOptions;

  constructor(
    @Inject(DISTRIBUTED_LOCK_OPTIONS) options: DistributedLockModuleOptions,
    @Optional() private readonly adapterHost?: HttpAdapterHost,
  ) {
    this.options = resolveLockOptions(options);
  }

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    return next
      .handle()
      .pipe(
        catchError((error: unknown) =>
          throwError(() =>
            error instanceof LockError ? this.translate(error, context) : error,
          ),
        ),
      );
  }

  private translate(error: LockError, context: ExecutionContext): unknown {
    const type = context.getType<string>();
    // The hint holds whoever shapes the body, so a custom mapping keeps it too.
    if (type === 'http') this.setRetryAfter(error, context);
    const custom = this.options.mapError?.(error, context);
    if (custom !== undefined) return custom;
    const status = this.statusOf(error);
    const body: LockErrorBody = {
      statusCode: status,
      error: errorName(status),
      message: publicMessage(error),
      code: error.code,
      ...(error instanceof LockNotAcquiredError ||
      error instanceof LockLostError
        ? { key: error.key }
        : {}),
    };
    if (type === 'http')
      return new HttpException(body, status, { cause: error });
    if (type === 'rpc') return rpcException(body, error);
    return error;
  }

  private statusOf(error: LockError): number {
    const { statuses } = this.options;
    if (error instanceof LockNotAcquiredError) return statuses.notAcquired;
    if (error instanceof LockKeyError) return statuses.invalidKey;
    if (error instanceof LockBackendError) return statuses.backendUnavailable;
    if (error instanceof LockLostError) return statuses.lost;
    // LockUnsupportedError among them: a misconfigured server, not an outage.
    return HttpStatus.INTERNAL_SERVER_ERROR;
  }

  private setRetryAfter(error: LockError, context: ExecutionContext): void {
    const adapter = this.adapterHost?.httpAdapter;
    const setting = this.options.retryAfter;
    if (!adapter || setting === false) return;
    let seconds: number | undefined;
    if (error instanceof LockNotAcquiredError) {
      seconds =
        setting === 'lease'
          ? Math.max(1, Math.ceil((error.retryAfterMs ?? 1000) / 1000))
          : setting;
    } else if (error instanceof LockBackendError) {
      seconds = setting === 'lease' ? 1 : setting;
    }
    if (seconds === undefined) return;
    adapter.setHeader(
      context.switchToHttp().getResponse(),
      'Retry-After',
      String(seconds),
    );
  }
}

function publicMessage(error: LockError): string {
  // Never leak connection details of the store to clients.
  if (error instanceof LockBackendError)
    return 'The lock service is unavailable, try again later';
  if (error instanceof LockNotAcquiredError) {
    return `The resource "${error.key}" is busy, try again later`;
  }
  // Its message names the server's configuration; clients need not know it.
  if (error instanceof LockUnsupportedError)
    return `This server does not support ${error.primitive}s`;
  return error.message;
}

function errorName(status: number): string {
  const name = HttpStatus[status] as string | undefined;
  if (!name) return 'Error';
  return name
    .toLowerCase()
    .split('_')
    .map((word) => word[0].toUpperCase() + word.slice(1))
    .join(' ');
}

let rpcExceptionClass: (new (error: object) => Error) | null | undefined;

/** `@nestjs/microservices` is optional: only apps that use it get RpcException. */
function rpcException(body: LockErrorBody, error: LockError): unknown {
  return rpcExceptionClass ? new rpcExceptionClass(body) : error;
}

/** Loads RpcException once, if the app has `@nestjs/microservices`. */
export async function loadRpcException(): Promise<void> {
  if (rpcExceptionClass !== undefined) return;
  try {
    const microservices = (await import('@nestjs/microservices')) as {
      RpcException: new (error: object) => Error;
    };
    rpcExceptionClass = microservices.RpcException;
  } catch {
    rpcExceptionClass = null;
  }
}
