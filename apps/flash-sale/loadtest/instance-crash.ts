import { setTimeout as sleep } from 'node:timers/promises';
import type { CrashContext, CrashScenario } from './drive-load.js';
import type { AppInstance } from './instances.js';
import type { CrashReport } from './load-test-report.js';

/**
 * `killOneAt`: SIGKILL the last instance when request `atRequest` is sent,
 * then start it again on its port after `restartDelayMs`.
 */
export function killLastInstance(
  instances: readonly AppInstance[],
  atRequest: number,
  restartDelayMs: number,
  event: (message: string) => void,
): CrashScenario {
  return {
    atRequest,
    async run(context) {
      const victim = instances[instances.length - 1];
      const killedAtMs = context.sinceStart();
      context.note(`instance ${victim.index + 1} killed`);
      event(
        `SIGKILL instance ${victim.index + 1} (pid ${victim.pid}, port ${victim.port}) at request ${atRequest}`,
      );
      await victim.kill();
      await sleep(restartDelayMs);
      return restartKilled(
        victim,
        { instance: victim.index, port: victim.port, atRequest, killedAtMs },
        context,
        event,
      );
    },
  };
}

/**
 * Starts the killed `victim` again on its port (its startup reconciles the
 * coupon under the coupon's lock) and adds how that went to `crash`.
 */
export async function restartKilled(
  victim: AppInstance,
  crash: CrashReport,
  context: CrashContext,
  event: (message: string) => void,
): Promise<CrashReport> {
  context.note(`instance ${victim.index + 1} restarting`);
  event(`Restarting instance ${victim.index + 1} on port ${victim.port}`);
  try {
    await victim.start();
    const restartedAtMs = context.sinceStart();
    event(
      `Instance ${victim.index + 1} is back after ${((restartedAtMs - crash.killedAtMs) / 1000).toFixed(1)} s (reconciled at startup)`,
    );
    return { ...crash, restartedAtMs };
  } catch (error) {
    event(
      `Restarting instance ${victim.index + 1} failed: ${(error as Error).message}`,
    );
    return { ...crash, restartError: (error as Error).message };
  }
}
