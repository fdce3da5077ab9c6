import type { PipeTransform } from '@nestjs/common';
import { badRequest } from '../app-exception.js';

const MAX_ID = 2_147_483_647; // PostgreSQL integer

/**
 * Parses a path parameter such as `couponId` into a positive integer, or
 * answers 400 `BAD_REQUEST`: `'7'` is 7; `'07'`, `'7.0'`, `'1e3'`, `'-1'`,
 * `'0'` and `'abc'` are refused. Used as an instance: `new PositiveIntPipe('couponId')`.
 */
export class PositiveIntPipe implements PipeTransform<unknown, number> {
  constructor(private readonly name: string) {}

  transform(value: unknown): number {
    if (
      typeof value === 'string' &&
      /^[1-9]\d{0,9}$/.test(value) &&
      Number(value) <= MAX_ID
    ) {
      return Number(value);
    }
    throw badRequest(
      `${this.name} must be a positive integer no larger than ${MAX_ID}`,
    );
  }
}
