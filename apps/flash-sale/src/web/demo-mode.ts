import { Injectable, type CanActivate } from '@nestjs/common';
import { notFound } from '../common/app-exception.js';

/** The environment variable that turns the demo's controls on (`npm run demo` sets it). */
export const DEMO_MODE_ENV = 'FLASH_SALE_DEMO';

/** Whether this process runs as part of `npm run demo` (FLASH_SALE_DEMO=1): never in the default app. */
export function demoModeOn(env: NodeJS.ProcessEnv = process.env): boolean {
  return env[DEMO_MODE_ENV] === '1';
}

/** Lets a request through only in demo mode; anywhere else 404, as if the route did not exist. */
@Injectable()
export class DemoModeGuard implements CanActivate {
  canActivate(): boolean {
    if (!demoModeOn()) throw notFound('No such route');
    return true;
  }
}
