import { HttpException, HttpStatus } from '@nestjs/common';

/** Machine-readable codes of every error answer the app gives. */
export type ErrorCode =
  | 'BAD_REQUEST'
  | 'UNAUTHORIZED'
  | 'FORBIDDEN'
  | 'NOT_FOUND'
  | 'SOLD_OUT'
  | 'ALREADY_PURCHASED'
  | 'NOT_ON_SALE'
  | 'BUSY'
  | 'UNAVAILABLE'
  | 'PAYLOAD_TOO_LARGE'
  | 'METHOD_NOT_ALLOWED'
  | 'UNSUPPORTED_MEDIA_TYPE'
  | 'INTERNAL_ERROR';

/** The one JSON shape of every error answer. */
export interface ErrorBody {
  readonly ok: false;
  readonly code: ErrorCode;
  readonly message: string;
  /** ALREADY_PURCHASED only: the user's existing order. */
  readonly orderId?: number;
}

/**
 * An error the app answers with `{ ok: false, code, message }` and its status.
 * `retryAfter` (seconds) becomes a `Retry-After` header.
 */
export class AppException extends HttpException {
  constructor(
    readonly code: ErrorCode,
    status: number,
    message: string,
    readonly retryAfter?: number,
    options?: { cause?: unknown; orderId?: number },
  ) {
    const body: ErrorBody = { ok: false, code, message };
    super(
      options?.orderId === undefined
        ? body
        : { ...body, orderId: options.orderId },
      status,
      options,
    );
  }

  get body(): ErrorBody {
    return this.getResponse() as ErrorBody;
  }
}

export const badRequest = (message: string) =>
  new AppException('BAD_REQUEST', HttpStatus.BAD_REQUEST, message);

export const notFound = (message: string) =>
  new AppException('NOT_FOUND', HttpStatus.NOT_FOUND, message);

export const soldOut = () =>
  new AppException('SOLD_OUT', HttpStatus.CONFLICT, 'The coupon is sold out');

/** A repeat (or retried) purchase: 409 with the order the database has for the user. */
export const alreadyPurchased = (orderId: number) =>
  new AppException(
    'ALREADY_PURCHASED',
    HttpStatus.CONFLICT,
    'This user has already bought this coupon',
    undefined,
    { orderId },
  );

export const notOnSale = (message: string) =>
  new AppException('NOT_ON_SALE', HttpStatus.CONFLICT, message);

export const busy = (retryAfter = 1) =>
  new AppException(
    'BUSY',
    HttpStatus.TOO_MANY_REQUESTS,
    'Too many buyers right now, try again shortly',
    retryAfter,
  );

/** Redis or the database is unreachable or too slow. Never carries connection details. */
export const unavailable = (cause?: unknown) =>
  new AppException(
    'UNAVAILABLE',
    HttpStatus.SERVICE_UNAVAILABLE,
    'The service is temporarily unavailable, try again later',
    1,
    { cause },
  );
