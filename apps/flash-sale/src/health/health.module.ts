import { Module } from '@nestjs/common';
import { HealthController } from './health.controller.js';

@Module({ controllers: [HealthController] })
// oxlint-disable-next-line typescript/no-extraneous-class -- a Nest module
export class HealthModule {}
