/**
 * Malformed lock templates are rejected when the controller class is
 * defined, before any app starts.
 */
import { Controller, Param, Post } from '@nestjs/common';
import { DistributedLock, LockTemplateError } from '@app/distributed-lock';

export function describeStartupErrors(): void {
  describe('startup errors', () => {
    it('rejects a malformed template when the class is defined, naming class, method and template', () => {
      expect(defineMalformedTemplateController).toThrow(LockTemplateError);
      const error = templateErrorOf(defineMalformedTemplateController);
      expect(error).toMatchObject({
        code: 'LOCK_TEMPLATE_INVALID',
        className: 'MalformedTemplateController',
        methodName: 'buy',
        template: 'coupon:<0',
      });
      expect(error.message).toContain('MalformedTemplateController.buy');
      expect(error.message).toContain('"coupon:<0"');
    });

    it('rejects <2> on a method that takes one parameter', () => {
      expect(defineOutOfRangeController).toThrow(LockTemplateError);
      const error = templateErrorOf(defineOutOfRangeController);
      expect(error).toMatchObject({
        className: 'OutOfRangeController',
        methodName: 'buy',
        template: 'coupon:<2>',
      });
      expect(error.message).toContain('OutOfRangeController.buy');
      expect(error.message).toContain('coupon:<2>');
      expect(error.message).toMatch(/<2>.*takes 1/);
    });
  });
}

/** Defines (and so decorates) a controller whose lock template is malformed. */
function defineMalformedTemplateController() {
  @Controller('broken')
  class MalformedTemplateController {
    @Post(':id')
    @DistributedLock('coupon:<0')
    buy(@Param('id') id: string) {
      return id;
    }
  }
  return MalformedTemplateController;
}

/** Defines a controller whose template reads an argument the method does not take. */
function defineOutOfRangeController() {
  @Controller('broken')
  class OutOfRangeController {
    @Post(':id')
    @DistributedLock('coupon:<2>')
    buy(@Param('id') id: string) {
      return id;
    }
  }
  return OutOfRangeController;
}

function templateErrorOf(define: () => unknown): LockTemplateError {
  try {
    define();
  } catch (error) {
    expect(error).toBeInstanceOf(LockTemplateError);
    return error as LockTemplateError;
  }
  throw new Error('defining the controller did not throw');
}
