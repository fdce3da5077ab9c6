import { Injectable, type PipeTransform } from '@nestjs/common';
import { badRequest } from '../app-exception.js';

export const USER_ID_MAX_LENGTH = 64;
const USER_ID = /^[A-Za-z0-9_-]+$/;

/** Validates the buyer from the `userId` header: 1 to 64 of `A-Z a-z 0-9 _ -`. */
@Injectable()
export class UserIdPipe implements PipeTransform<unknown, string> {
  transform(value: unknown): string {
    if (value === undefined || value === '') {
      throw badRequest('The userId header is required');
    }
    if (typeof value !== 'string') {
      throw badRequest('The userId header must be given once');
    }
    if (value.length > USER_ID_MAX_LENGTH) {
      throw badRequest(
        `userId must be at most ${USER_ID_MAX_LENGTH} characters long`,
      );
    }
    if (!USER_ID.test(value)) {
      throw badRequest('userId may contain only letters, digits, "_" and "-"');
    }
    return value;
  }
}
