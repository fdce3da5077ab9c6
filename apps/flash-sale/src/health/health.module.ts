import { Module } from '@nestjs/common';
import { TerminusModule } from '@nestjs/terminus';
import { HealthController } from './health.controller.js';
import { ReadinessCheck } from './readiness-check.js';

@Module({
  imports: [TerminusModule.forRoot()],
  controllers: [HealthController],
  providers: [ReadinessCheck],
})
// oxlint-disable-next-line typescript/no-extraneous-class -- a Nest module
export class HealthModule {}
