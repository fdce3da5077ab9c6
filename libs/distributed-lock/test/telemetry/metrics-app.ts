/**
 * A Nest app with `metrics` on, serving its own registry at `/metrics`, and
 * a scrape of it parsed: what the metrics specs read their numbers from.
 */
import { Controller, Get, Header, Module, type Provider } from '@nestjs/common';
import type { INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { Registry } from 'prom-client';
import {
  DistributedLockModule,
  LockService,
  type DistributedLockModuleOptions,
} from '@app/distributed-lock';
import {
  parsePrometheusText,
  type Scrape,
} from '../../../../test/support/prometheus-text.js';

/** The registry the apps report to (cleared by {@link MetricsApp.close}). */
export const registry = new Registry();

@Controller('metrics')
class MetricsController {
  @Get()
  @Header('content-type', registry.contentType)
  scrape(): Promise<string> {
    return registry.metrics();
  }
}

export interface MetricsApp {
  readonly app: INestApplication;
  readonly locks: LockService;
  /** GET /metrics, checked to be Prometheus text, parsed. */
  scrape(): Promise<Scrape>;
  close(): Promise<void>;
}

/** Starts the app on `redisUrl` with `options` over the defaults (metrics to {@link registry}, no tracing). */
export async function startMetricsApp(
  redisUrl: string,
  options: Partial<DistributedLockModuleOptions> = {},
  providers: Provider[] = [],
): Promise<MetricsApp> {
  @Module({
    imports: [
      DistributedLockModule.forRoot({
        redis: redisUrl,
        metrics: { registry },
        tracing: false,
        ...options,
      }),
    ],
    controllers: [MetricsController],
    providers,
  })
  // oxlint-disable-next-line typescript/no-extraneous-class -- a Nest module
  class AppModule {}
  const moduleRef = await Test.createTestingModule({
    imports: [AppModule],
  }).compile();
  const app = moduleRef.createNestApplication({ logger: false });
  await app.listen(0, '127.0.0.1');
  const url = await app.getUrl();
  return {
    app,
    locks: app.get(LockService),
    scrape: async () => {
      const response = await fetch(`${url}/metrics`);
      expect(response.status).toBe(200);
      expect(response.headers.get('content-type')).toContain('text/plain');
      return parsePrometheusText(await response.text());
    },
    close: async () => {
      await app.close();
      registry.clear();
    },
  };
}

export const sleep = (ms: number) =>
  new Promise<void>((resolve) => setTimeout(resolve, ms));
