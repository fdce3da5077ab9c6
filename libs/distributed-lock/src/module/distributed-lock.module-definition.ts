import { ConfigurableModuleBuilder } from '@nestjs/common';
import type { DistributedLockModuleOptions } from './distributed-lock.options.js';

export const {
  ConfigurableModuleClass,
  MODULE_OPTIONS_TOKEN: DISTRIBUTED_LOCK_OPTIONS,
  OPTIONS_TYPE,
  ASYNC_OPTIONS_TYPE,
} = new ConfigurableModuleBuilder<DistributedLockModuleOptions>()
  .setClassMethodName('forRoot')
  .setExtras({ isGlobal: false }, (definition, extras) => ({
    ...definition,
    global: extras.isGlobal,
  }))
  .build();
