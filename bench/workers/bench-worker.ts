/**
 * A benchmark worker process, driven over the IPC channel by a BenchWorker;
 * exits when the channel closes. Every worker serves the contenders of one
 * library (in A and B with the raw baseline beside them), so that no other
 * library's calls shape V8's optimisation of the code they share. In C it
 * opens a contender and runs its loops of a contention window when told,
 * reporting the events; in A and B it runs a contender's slices side by side
 * with the raw baseline, and in H ours and the raw lock on one deployment.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import {
  openOnDeployment,
  type DeploymentSide,
} from '../contenders/deployments.js';
import { contender } from '../contenders/index.js';
import type { ContenderInstance } from '../contenders/types.js';
import { runContention } from '../scenarios/contention-core.js';
import { errorText } from '../scenarios/context.js';
import { runInTurns, runSideBySide } from '../scenarios/side-by-side.js';
import type { WorkerReply, WorkerRequest } from './protocol.js';

let instance: ContenderInstance | undefined;

function reply(message: WorkerReply): void {
  process.send?.(message);
}

async function handle(request: WorkerRequest): Promise<void> {
  try {
    switch (request.type) {
      case 'open':
        await instance?.close();
        instance = await contender(request.contenderId).create({
          urls: request.urls,
        });
        reply({ id: request.id, ok: true });
        return;
      case 'run':
        if (!instance) throw new Error('no contender open');
        reply({
          id: request.id,
          ok: true,
          events: await runContention(instance, request.spec),
        });
        return;
      case 'side-by-side':
        reply({
          id: request.id,
          ok: true,
          sideBySide: await runSideBySide(request.spec),
        });
        return;
      case 'deployment': {
        const { deployment } = request.spec;
        reply({
          id: request.id,
          ok: true,
          sideBySide: await runInTurns(request.spec, (side) =>
            openOnDeployment(side as DeploymentSide, deployment),
          ),
        });
        return;
      }
      case 'close': {
        const open = instance;
        instance = undefined;
        await open?.close();
        reply({ id: request.id, ok: true });
        return;
      }
    }
  } catch (error) {
    reply({ id: request.id, ok: false, error: errorText(error) });
  }
}

// As in the main process (see run.ts): every contender runs with the promise
// hooks that @DistributedLock's AsyncLocalStorage brings on Node 20.
new AsyncLocalStorage<object>().run({}, () => undefined);
process.on('message', (message) => void handle(message as WorkerRequest));
// Tells the parent that requests can come now.
reply({ id: 0, ok: true });
process.on('disconnect', () => {
  void (instance?.close() ?? Promise.resolve()).finally(() => process.exit(0));
  setTimeout(() => process.exit(0), 2_000).unref();
});
