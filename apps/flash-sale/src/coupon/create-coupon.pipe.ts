import type { PipeTransform } from '@nestjs/common';
import { badRequest } from '../common/app-exception.js';

/** A validated `POST /api/coupons` body. */
export interface CreateCouponInput {
  readonly name: string;
  readonly price: number;
  readonly stock: number;
  readonly startAt: Date;
  readonly endAt: Date;
}

export const MAX_STOCK = 1_000_000;
export const MAX_PRICE = 9_999_999_999.99; // numeric(12, 2)
export const MAX_NAME_LENGTH = 200;
/** Sale window length when `endAt` is omitted. */
export const DEFAULT_SALE_DURATION_MS = 24 * 60 * 60 * 1000;

const FIELDS = new Set(['name', 'price', 'stock', 'startAt', 'endAt']);
// An ISO 8601 date and time with a UTC offset, e.g. 2030-01-31T12:00:00Z or 2030-01-31T12:00+01:00.
const ISO_DATE_TIME =
  /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$/;

/**
 * Validates `{ name, price, stock, startAt?, endAt? }` by hand: name 1 to 200
 * characters, price a number >= 0 with at most 2 decimals, stock an integer
 * from 0 to 1,000,000, dates ISO 8601 strings with an offset, endAt after
 * startAt. The window opens now when startAt is omitted and lasts a day when
 * endAt is omitted. Unknown fields are refused (400).
 */
export class CreateCouponPipe implements PipeTransform<
  unknown,
  CreateCouponInput
> {
  constructor(private readonly now: () => Date = () => new Date()) {}

  transform(body: unknown): CreateCouponInput {
    if (typeof body !== 'object' || body === null || Array.isArray(body)) {
      throw badRequest('The body must be a JSON object');
    }
    const fields = body as Record<string, unknown>;
    const unknown = Object.keys(fields).filter((key) => !FIELDS.has(key));
    if (unknown.length > 0) {
      throw badRequest(`Unknown field(s): ${unknown.slice(0, 5).join(', ')}`);
    }

    const { name, price, stock } = fields;
    if (typeof name !== 'string' || name.trim().length === 0) {
      throw badRequest('name must be a non-empty string');
    }
    if (name.trim().length > MAX_NAME_LENGTH) {
      throw badRequest(
        `name must be at most ${MAX_NAME_LENGTH} characters long`,
      );
    }
    if (typeof price !== 'number' || !Number.isFinite(price) || price < 0) {
      throw badRequest('price must be a number >= 0');
    }
    if (price > MAX_PRICE || Math.round(price * 100) / 100 !== price) {
      throw badRequest(
        `price must have at most 2 decimals and be at most ${MAX_PRICE}`,
      );
    }
    if (
      typeof stock !== 'number' ||
      !Number.isInteger(stock) ||
      stock < 0 ||
      stock > MAX_STOCK
    ) {
      throw badRequest(`stock must be an integer from 0 to ${MAX_STOCK}`);
    }

    const startAt = optionalDate(fields.startAt, 'startAt') ?? this.now();
    const endAt =
      optionalDate(fields.endAt, 'endAt') ??
      new Date(startAt.getTime() + DEFAULT_SALE_DURATION_MS);
    if (endAt <= startAt) {
      throw badRequest('endAt must be later than startAt');
    }
    return { name: name.trim(), price, stock, startAt, endAt };
  }
}

function optionalDate(value: unknown, field: string): Date | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value === 'string' && ISO_DATE_TIME.test(value)) {
    const time = Date.parse(value);
    if (Number.isFinite(time)) return new Date(time);
  }
  throw badRequest(
    `${field} must be an ISO 8601 date and time with an offset, e.g. 2030-01-31T12:00:00Z`,
  );
}
