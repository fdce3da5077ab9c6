import { createParamDecorator, type ExecutionContext } from '@nestjs/common';
import { UserIdPipe } from './pipes/user-id.pipe.js';

/**
 * The buyer from the `userId` request header (header names are
 * case-insensitive), validated by {@link UserIdPipe}: 400 when missing or
 * malformed. `@Headers()` takes no pipes, hence this decorator.
 */
export const UserId = (): ParameterDecorator =>
  userIdHeader(undefined, new UserIdPipe());

const userIdHeader = createParamDecorator(
  (_data: unknown, context: ExecutionContext): unknown =>
    context.switchToHttp().getRequest<{ headers: Record<string, unknown> }>()
      .headers['userid'],
);
