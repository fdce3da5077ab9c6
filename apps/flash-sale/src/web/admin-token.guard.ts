import { createHash, timingSafeEqual } from 'node:crypto';
import {
  HttpStatus,
  Injectable,
  type CanActivate,
  type ExecutionContext,
} from '@nestjs/common';
import { AppException } from '../common/app-exception.js';

/** The environment variable holding the admin token. */
export const ADMIN_TOKEN_ENV = 'ADMIN_TOKEN';

/** Shorter tokens are refused: the guard then lets nobody in. */
export const ADMIN_TOKEN_MIN_LENGTH = 16;

interface AdminRequest {
  readonly headers: Record<string, string | string[] | undefined>;
}

interface AdminReply {
  setHeader(name: string, value: string): unknown;
}

/** The configured token, or undefined when unset or too short (then admin routes are closed). */
export function configuredAdminToken(
  env: NodeJS.ProcessEnv = process.env,
): string | undefined {
  const token = env[ADMIN_TOKEN_ENV]?.trim();
  return token && token.length >= ADMIN_TOKEN_MIN_LENGTH ? token : undefined;
}

const digest = (text: string) => createHash('sha256').update(text).digest();

/** Compares in constant time (the digests have the same length whatever the inputs). */
function sameToken(given: string, expected: string): boolean {
  return timingSafeEqual(digest(given), digest(expected));
}

/**
 * Admin routes (creating coupons): `Authorization: Bearer <ADMIN_TOKEN>`.
 * No token sent: 401 with `WWW-Authenticate: Bearer`; a wrong token, or no
 * ADMIN_TOKEN configured on the server: 403. The token is read from the
 * environment at each request. Guards run before pipes, so a body is
 * validated (400) only for a caller with the token.
 */
@Injectable()
export class AdminTokenGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const http = context.switchToHttp();
    const request = http.getRequest<AdminRequest>();
    const header = request.headers.authorization;
    const match = /^Bearer\s+(\S+)\s*$/i.exec(
      typeof header === 'string' ? header : '',
    );
    if (!match) {
      http.getResponse<AdminReply>().setHeader('WWW-Authenticate', 'Bearer');
      throw new AppException(
        'UNAUTHORIZED',
        HttpStatus.UNAUTHORIZED,
        'This needs the admin token: Authorization: Bearer <ADMIN_TOKEN>',
      );
    }
    const expected = configuredAdminToken();
    if (!expected) {
      throw new AppException(
        'FORBIDDEN',
        HttpStatus.FORBIDDEN,
        `Admin routes are closed: the server has no ${ADMIN_TOKEN_ENV} (at least ${ADMIN_TOKEN_MIN_LENGTH} characters)`,
      );
    }
    if (!sameToken(match[1], expected)) {
      throw new AppException(
        'FORBIDDEN',
        HttpStatus.FORBIDDEN,
        'The admin token is wrong',
      );
    }
    return true;
  }
}
