import { Injectable, type PipeTransform } from '@nestjs/common';
import { badRequest } from '../app-exception.js';

export const DEFAULT_LIMIT = 100;
export const MAX_LIMIT = 1000;

/** The `?limit=` query parameter: an integer from 1 to 1000, 100 when absent. */
@Injectable()
export class LimitPipe implements PipeTransform<unknown, number> {
  transform(value: unknown): number {
    if (value === undefined) return DEFAULT_LIMIT;
    if (
      typeof value === 'string' &&
      /^[1-9]\d{0,3}$/.test(value) &&
      Number(value) <= MAX_LIMIT
    ) {
      return Number(value);
    }
    throw badRequest(`limit must be an integer from 1 to ${MAX_LIMIT}`);
  }
}
