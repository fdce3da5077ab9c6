/**
 * C, I and J compare stamps taken in different worker processes (hand-offs,
 * holders at once, readers beside a writer): the benchmark's clock must be
 * one clock in every process, to well under the 50 µs their checks allow.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { nowMs } from '../../bench/clock.js';

const repoRoot = fileURLToPath(new URL('../../', import.meta.url));
/** A worker that answers every message with its own reading of the clock. */
const childSource = `
  const { nowMs } = await import(${JSON.stringify(new URL('../../bench/clock.ts', import.meta.url).href)});
  process.on('message', () => process.send(nowMs()));
  process.send('ready');
`;

function startChild(): Promise<ChildProcess> {
  const child = spawn(
    process.execPath,
    [
      '--import',
      '@swc-node/register/esm-register',
      '--input-type=module',
      '-e',
      childSource,
    ],
    { cwd: repoRoot, stdio: ['ignore', 'ignore', 'inherit', 'ipc'] },
  );
  return new Promise((resolve, reject) => {
    child.once('message', () => resolve(child));
    child.once('error', reject);
  });
}

function childReading(child: ChildProcess): Promise<number> {
  return new Promise((resolve) => {
    child.once('message', (reading) => resolve(reading as number));
    child.send('now');
  });
}

describe('the benchmark clock', () => {
  it('reads the same in processes started at different moments', async () => {
    const children: ChildProcess[] = [];
    try {
      for (let i = 0; i < 4; i++) {
        children.push(await startChild());
        await new Promise((resolve) => setTimeout(resolve, 150));
      }
      for (const child of children) {
        // Each child's reading lies between the parent's before and after.
        let worst = 0;
        for (let i = 0; i < 5; i++) {
          const before = nowMs();
          const reading = await childReading(child);
          const after = nowMs();
          worst = Math.max(worst, before - reading, reading - after);
        }
        expect(worst).toBeLessThanOrEqual(0.05);
      }
    } finally {
      for (const child of children) child.kill();
    }
  });
});
