import {
  Catch,
  HttpException,
  HttpStatus,
  Logger,
  type ArgumentsHost,
  type ExceptionFilter,
} from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import {
  LockBackendError,
  LockError,
  LockKeyError,
  LockNotAcquiredError,
} from '@app/distributed-lock';
import {
  AppException,
  badRequest,
  busy,
  unavailable,
  type ErrorCode,
} from './app-exception.js';
import { isInfrastructureError } from './infrastructure-errors.js';

const CODE_BY_STATUS: Partial<Record<number, ErrorCode>> = {
  400: 'BAD_REQUEST',
  401: 'UNAUTHORIZED',
  403: 'FORBIDDEN',
  404: 'NOT_FOUND',
  405: 'METHOD_NOT_ALLOWED',
  413: 'PAYLOAD_TOO_LARGE',
  415: 'UNSUPPORTED_MEDIA_TYPE',
  429: 'BUSY',
  503: 'UNAVAILABLE',
};

/**
 * The lock module's `mapError`: lock failures become the app's own answers
 * (busy 429 with Retry-After, or the app's reason for stopping the wait;
 * Redis down 503; a key that cannot be built 400).
 */
export function mapLockError(error: LockError): AppException {
  if (error instanceof LockNotAcquiredError)
    // A wait the app stopped (the coupon sold out) answers with its reason.
    return error.cause instanceof AppException ? error.cause : busy(1);
  if (error instanceof LockKeyError) return badRequest(error.message);
  if (error instanceof LockBackendError) return unavailable(error);
  // LockLostError: the outcome is unknown to the client; let it retry.
  return unavailable(error);
}

/** Turns anything thrown while handling a request into the app's error shape. */
export function toAppException(exception: unknown): AppException {
  if (exception instanceof AppException) return exception;
  if (exception instanceof LockError) return mapLockError(exception);
  if (exception instanceof HttpException) {
    const status = exception.getStatus();
    const code =
      CODE_BY_STATUS[status] ?? (status >= 500 ? 'INTERNAL_ERROR' : undefined);
    return new AppException(
      code ?? 'BAD_REQUEST',
      code ? status : HttpStatus.BAD_REQUEST,
      messageOf(exception.getResponse()) ?? exception.message,
      status === 429 || status === 503 ? 1 : undefined,
      { cause: exception },
    );
  }
  if (isInfrastructureError(exception)) return unavailable(exception);
  // Errors of Express middleware (a malformed JSON body, a body too large)
  // carry a 4xx status and a message meant for the client.
  const { status, expose, message } = (exception ?? {}) as {
    status?: unknown;
    expose?: unknown;
    message?: unknown;
  };
  if (
    typeof status === 'number' &&
    status >= 400 &&
    status < 500 &&
    expose === true
  ) {
    return new AppException(
      CODE_BY_STATUS[status] ?? 'BAD_REQUEST',
      CODE_BY_STATUS[status] ? status : HttpStatus.BAD_REQUEST,
      typeof message === 'string' ? message : 'Bad request',
      undefined,
      { cause: exception },
    );
  }
  return new AppException(
    'INTERNAL_ERROR',
    HttpStatus.INTERNAL_SERVER_ERROR,
    'Internal server error',
    undefined,
    { cause: exception },
  );
}

function messageOf(response: unknown): string | undefined {
  if (typeof response === 'string') return response;
  const message = (response as { message?: unknown } | null)?.message;
  if (typeof message === 'string') return message;
  if (Array.isArray(message)) return message.map(String).join('; ');
  return undefined;
}

/** One global filter: every error answer is `{ ok: false, code, message }`. */
@Catch()
export class AppExceptionFilter implements ExceptionFilter {
  private readonly logger = new Logger('FlashSale');
  private lastUnavailable = '';

  constructor(private readonly adapterHost: HttpAdapterHost) {}

  catch(exception: unknown, host: ArgumentsHost): void {
    const error = toAppException(exception);
    this.log(error, exception);
    const { httpAdapter } = this.adapterHost;
    const response = host.switchToHttp().getResponse<unknown>();
    if (httpAdapter.isHeadersSent(response)) return;
    if (error.retryAfter !== undefined) {
      httpAdapter.setHeader(response, 'Retry-After', String(error.retryAfter));
    }
    httpAdapter.reply(response, error.body, error.getStatus());
  }

  private log(error: AppException, original: unknown): void {
    if (error.code === 'INTERNAL_ERROR') {
      this.logger.error(
        `Unexpected error: ${describe(original)}`,
        (original as Error | undefined)?.stack,
      );
    } else if (error.code === 'UNAVAILABLE') {
      // Say it once per distinct cause, not once per request.
      const cause = describe(
        original instanceof AppException ? original.cause : original,
      );
      if (cause !== this.lastUnavailable) {
        this.logger.warn(`Answering 503: ${cause}`);
        this.lastUnavailable = cause;
      }
    }
  }
}

function describe(error: unknown): string {
  if (error instanceof Error) return `${error.name}: ${error.message}`;
  return String(error);
}
