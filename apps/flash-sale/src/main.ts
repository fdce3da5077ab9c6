import 'reflect-metadata';
import { realpathSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { pathToFileURL } from 'node:url';
import {
  Logger,
  type INestApplication,
  type LogLevel,
  type LoggerService,
} from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { AppModule } from './app.module.js';
import { openRuntime } from './app.runtime.js';
import {
  loadConfig,
  mergeConfig,
  type AppConfigOverrides,
} from './config/app-config.js';

export interface CreateAppOptions {
  /** Overrides of the configuration read from the environment (tests inject theirs here). */
  readonly config?: AppConfigOverrides;
  /** The environment to read the configuration from. Default `process.env`. */
  readonly env?: NodeJS.ProcessEnv;
  /** Nest's logger option, e.g. `false` or `['error', 'warn']`. Default: Nest's console logger. */
  readonly logger?: LoggerService | LogLevel[] | false;
}

/**
 * Builds and initialises the flash-sale app without listening: connects to
 * Redis and the database (or starts the local fallbacks), migrates the
 * schema, loads the stock of the coupons on sale into Redis. Call
 * `app.listen(port)`, or use `app.getHttpServer()` in tests; `app.close()`
 * releases everything it opened.
 */
export async function createApp(
  options: CreateAppOptions = {},
): Promise<INestApplication> {
  const config = mergeConfig(
    loadConfig(options.env ?? process.env),
    options.config,
  );
  if (options.logger !== undefined) Logger.overrideLogger(options.logger);
  const runtime = await openRuntime(config, new Logger('FlashSale'));
  let app: INestApplication | undefined;
  try {
    app = await NestFactory.create(AppModule.register(runtime), {
      logger: options.logger,
      abortOnError: false,
    });
    await app.init();
    return app;
  } catch (error) {
    await app?.close().catch(() => undefined);
    await runtime.close();
    throw error;
  }
}

/** `node main.js`: reads the environment, listens on PORT, stops cleanly on SIGTERM/SIGINT. */
export async function bootstrap(): Promise<void> {
  const logger = new Logger('FlashSale');
  let app: INestApplication;
  try {
    app = await createApp();
  } catch (error) {
    logger.error(`Cannot start: ${(error as Error).message}`);
    process.exitCode = 1;
    return;
  }
  app.enableShutdownHooks();
  const { port } = loadConfig();
  await app.listen(port);
  const address = app.getHttpServer().address() as AddressInfo;
  logger.log(
    `Flash sale (pid ${process.pid}) listening on http://127.0.0.1:${address.port}`,
  );
}

function isEntryPoint(): boolean {
  const entry = process.argv[1];
  if (!entry) return false;
  try {
    return import.meta.url === pathToFileURL(realpathSync(entry)).href;
  } catch {
    return false;
  }
}

if (isEntryPoint()) await bootstrap();
