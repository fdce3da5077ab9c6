/**
 * `@DistributedLock` above or below `@Post` keeps the route's other
 * decorators working: status, headers, guards, Swagger metadata.
 */
import { Reflector } from '@nestjs/core';
import { DECORATORS, DocumentBuilder, SwaggerModule } from '@nestjs/swagger';
import { DISTRIBUTED_LOCK_METADATA } from '@app/distributed-lock';
import { DecoratorOrderController } from '../fixtures/controllers.js';
import { busyBody } from '../fixtures/expected-bodies.js';
import { send } from '../fixtures/http-app.js';
import type { HttpLockSuite } from '../fixtures/http-lock-suite.js';

export function describeRouteMetadata(h: HttpLockSuite): void {
  describe('route metadata survives the decorator', () => {
    it.each(['above', 'below'])(
      'serves a route with @DistributedLock %s @Post, with @HttpCode and @Header',
      async (position) => {
        const response = await send(h, `/decorators/${position}/1`);
        expect(response.status).toBe(202);
        expect(response.headers['x-handled-by']).toBe(position);
        expect(response.body).toEqual({
          id: '1',
          keys: [`${position}:1`],
        });
      },
    );

    it.each(['above', 'below'])(
      'keeps @UseGuards with @DistributedLock %s @Post, and the guard runs before the lock',
      async (position) => {
        const denied = await send(h, `/decorators/${position}/2`, {
          headers: { 'x-deny': '1' },
        });
        expect(denied.status).toBe(403);
        expect(denied.body).toMatchObject({ statusCode: 403 });

        // With the lock taken elsewhere, a denied request still gets 403, not 409.
        const held = await h.locks.acquire(`${position}:2`);
        try {
          const deniedWhileHeld = await send(h, `/decorators/${position}/2`, {
            headers: { 'x-deny': '1' },
          });
          expect(deniedWhileHeld.status).toBe(403);
          const busy = await send(h, `/decorators/${position}/2`);
          expect(busy.status).toBe(409);
          expect(busy.body).toEqual(busyBody(`${position}:2`));
        } finally {
          await held.release();
        }
      },
    );

    it('keeps Swagger @ApiOperation and @ApiResponse readable from the handler', () => {
      const reflector = h.app.get(Reflector);
      const { prototype } = DecoratorOrderController;
      for (const [handler, position] of [
        [prototype.above, 'above'],
        [prototype.below, 'below'],
      ] as const) {
        expect(reflector.get(DECORATORS.API_OPERATION, handler)).toEqual({
          summary: `Lock declared ${position} @Post`,
        });
        expect(Reflect.getMetadata(DECORATORS.API_RESPONSE, handler)).toEqual({
          '202': { description: `Accepted ${position}` },
        });
        // And the lock's own metadata sits next to them.
        expect(
          Reflect.getMetadata(DISTRIBUTED_LOCK_METADATA, handler),
        ).toMatchObject({ keys: { description: `${position}:<0>` } });
      }
    });

    it('lists both routes in the generated OpenAPI document', () => {
      const document = SwaggerModule.createDocument(
        h.app,
        new DocumentBuilder().setTitle('locks').build(),
      );
      for (const position of ['above', 'below']) {
        const operation = document.paths[`/decorators/${position}/{id}`]
          ?.post as
          { summary?: string; responses?: Record<string, unknown> } | undefined;
        expect(operation?.summary).toBe(`Lock declared ${position} @Post`);
        expect(operation?.responses).toHaveProperty('202');
      }
    });
  });
}
