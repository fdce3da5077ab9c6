/**
 * One of C's worker processes: opens a contender, runs its loops of a
 * contention window when told, and reports the events. Driven over the IPC
 * channel by WorkerPool; exits when the channel closes.
 */
import { contender } from '../contenders/index.js';
import type { ContenderInstance } from '../contenders/types.js';
import { runContention } from '../scenarios/contention-core.js';
import { errorText } from '../scenarios/context.js';
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

process.on('message', (message) => void handle(message as WorkerRequest));
// Tells the parent that requests can come now.
reply({ id: 0, ok: true });
process.on('disconnect', () => {
  void (instance?.close() ?? Promise.resolve()).finally(() => process.exit(0));
  setTimeout(() => process.exit(0), 2_000).unref();
});
