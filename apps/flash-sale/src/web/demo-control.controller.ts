import { Controller, HttpCode, Param, Post, UseGuards } from '@nestjs/common';
import { notFound } from '../common/app-exception.js';
import { AdminTokenGuard } from './admin-token.guard.js';
import { DemoModeGuard } from './demo-mode.js';
import { InstanceRegistry } from './instance-registry.service.js';

/**
 * `POST /api/demo/instances/:id/kill` (admin token): SIGKILLs one instance
 * of the demo, as a crash, to watch the sale carry on without it. Only when
 * FLASH_SALE_DEMO=1 (set by `npm run demo`), and only an instance listed as
 * alive on this host: anywhere else, 404 as if the route did not exist.
 */
@Controller('api/demo')
export class DemoControlController {
  constructor(private readonly registry: InstanceRegistry) {}

  @Post('instances/:id/kill')
  @HttpCode(202)
  @UseGuards(DemoModeGuard, AdminTokenGuard)
  async kill(@Param('id') id: string): Promise<{ ok: true; pid: number }> {
    const instances = await this.registry.read();
    const self = instances.find((instance) => instance.self);
    const victim = instances.find(
      (instance) => instance.id === id && instance.alive,
    );
    if (!victim || victim.host !== self?.host) {
      throw notFound(`No live instance ${id} on this host`);
    }
    if (victim.self) {
      // Answer first, then die: the page then reconnects to another instance.
      setTimeout(() => process.kill(process.pid, 'SIGKILL'), 50);
    } else {
      process.kill(victim.pid, 'SIGKILL');
    }
    return { ok: true, pid: victim.pid };
  }
}
