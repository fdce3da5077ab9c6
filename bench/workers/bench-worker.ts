/**
 * A benchmark worker process, driven over the IPC channel by a BenchWorker;
 * exits when the channel closes. Each worker opens one contender at a time,
 * always the same one (or one side of H's pair on one deployment), and
 * imports only that contender's module when it first opens it: a worker of
 * a raw baseline never loads Nest, reflect-metadata or the library, and
 * nothing here enables an AsyncLocalStorage. In C it runs the loops of a
 * contention window when told; in A, B, D and H it runs one turn of cycles
 * at a time, while the parent lets the other side's worker wait.
 */
import { openOnDeployment } from '../contenders/deployments.js';
import { contender, openContender } from '../contenders/index.js';
import type { ContenderInstance } from '../contenders/types.js';
import { runContention } from '../scenarios/contention-core.js';
import { errorText } from '../scenarios/context.js';
import type { OpenRequest, WorkerReply, WorkerRequest } from './protocol.js';
import { TurnRunner } from './turn-runner.js';

let instance: ContenderInstance | undefined;
let turns: TurnRunner | undefined;

function reply(message: WorkerReply): void {
  process.send?.(message);
}

/**
 * A baseline is only a baseline in a process without our code: Nest and the
 * library load reflect-metadata, which defines Reflect.getMetadata.
 */
function assertBaselineProcessClean(request: OpenRequest): void {
  const baseline =
    request.type === 'open'
      ? contender(request.contenderId).kind === 'baseline'
      : request.side === 'raw';
  const reflect = Reflect as unknown as { getMetadata?: unknown };
  if (baseline && typeof reflect.getMetadata === 'function')
    throw new Error('a raw baseline worker has reflect-metadata loaded');
}

async function open(request: OpenRequest): Promise<void> {
  await instance?.close();
  instance = undefined;
  turns = undefined;
  instance =
    request.type === 'open'
      ? await openContender(request.contenderId, { urls: request.urls })
      : await openOnDeployment(request.side, request.deployment);
  assertBaselineProcessClean(request);
  turns = new TurnRunner(instance);
}

async function handle(request: WorkerRequest): Promise<void> {
  try {
    switch (request.type) {
      case 'open':
      case 'open-deployment':
        await open(request);
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
      case 'turn':
        if (!turns) throw new Error('no contender open');
        reply({
          id: request.id,
          ok: true,
          turn: await turns.turn(request.spec),
        });
        return;
      case 'turn-latencies':
        if (!turns) throw new Error('no contender open');
        reply({ id: request.id, ok: true, latencies: turns.latencies() });
        return;
      case 'close': {
        const opened = instance;
        instance = undefined;
        turns = undefined;
        await opened?.close();
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
