import { Controller, Get, Header } from '@nestjs/common';
import { register } from 'prom-client';

/**
 * `GET /metrics`: the Prometheus scrape of this instance (the lock module's
 * `distributed_lock_*` metrics, in prom-client's global registry).
 */
@Controller('metrics')
export class MetricsController {
  @Get()
  @Header('Content-Type', register.contentType)
  @Header('Cache-Control', 'no-store')
  scrape(): Promise<string> {
    return register.metrics();
  }
}
