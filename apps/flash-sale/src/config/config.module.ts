import { Global, Module, type DynamicModule } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from './app-config.js';

/** Makes the resolved {@link AppConfig} injectable everywhere as `APP_CONFIG`. */
@Global()
@Module({})
// oxlint-disable-next-line typescript/no-extraneous-class -- a Nest module
export class ConfigModule {
  static register(config: AppConfig): DynamicModule {
    return {
      module: ConfigModule,
      providers: [{ provide: APP_CONFIG, useValue: config }],
      exports: [APP_CONFIG],
    };
  }
}
